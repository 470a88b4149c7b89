/**
 * The dashboard's rows on SQLite (BENCH_DB=sqlite, with BENCH_ONLY=dashboard or in the full run):
 * the same calls and backlogs as on Postgres (dashboard.ts), through better-sqlite3 on a file in
 * WAL mode, filled in bulk SQL (the triggers tally every row as a publish would).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Outboxer } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { createDashboard } from '../src/dashboard/index.js';
import type { BenchSettings } from './support.js';
import { DEAD, GROUPS, PARTITIONS, dashboardRow, timeCalls } from './dashboard.js';
import type { Report } from './report.js';
import { formatMs } from './report.js';
import { partitionsOfGroups, rows } from './support.js';

const TABLE = 'bench_dashboard';

/** `count` rows of one status from id `from` on, the way publish spreads groups over partitions. */
function fill(db: Database.Database, count: number, status: number, from: number): void {
  const parts = JSON.stringify(partitionsOfGroups(GROUPS, PARTITIONS));
  db.prepare(
    `WITH RECURSIVE g(x) AS (SELECT CAST(? AS INTEGER) UNION ALL SELECT x + 1 FROM g WHERE x < ?)
     INSERT INTO "${TABLE}" (outbox, partition, group_key, type, payload, headers, status)
     SELECT 'bench', json_extract(?, '$[' || (x % ${GROUPS}) || ']'), 'order:' || (x % ${GROUPS}), NULL,
       '{"n":"' || printf('%010d', x) || '","pad":"${'x'.repeat(173)}"}', NULL, ? FROM g`,
  ).run(from, from + count - 1, parts, status);
}

async function measure(directory: string, pending: number, iterations: number) {
  const path = join(directory, `dashboard-${pending}.db`);
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  try {
    const outboxer = new Outboxer({
      database: betterSqlite3(db),
      relay: false,
      logger: false,
      outboxes: { bench: { table: TABLE, partitions: PARTITIONS, onDead: 'park' } },
    });
    await outboxer.migrate();
    db.transaction(() => {
      fill(db, DEAD, 3, 1);
      fill(db, pending, 0, DEAD + 1);
    })();
    db.exec('ANALYZE');
    const handler = createDashboard(outboxer as Outboxer<never, boolean>);
    return await timeCalls(handler, pending, iterations);
  } finally {
    db.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
  }
}

export async function sqliteDashboardRows(ctx: {
  settings: BenchSettings;
  report: Report;
  log(message: string): void;
}): Promise<void> {
  const iterations = ctx.settings.quick ? 10 : 100;
  const small = rows(ctx.settings, 10_000, 2_000);
  const big = rows(ctx.settings, 1_000_000, 20_000);
  const directory = mkdtempSync(join(tmpdir(), 'outboxer-bench-dashboard-'));
  try {
    for (const count of [small, big]) {
      const m = await measure(directory, count, iterations);
      const row = dashboardRow('SQLite', count, m, iterations);
      ctx.report.rows.push(row);
      ctx.log(`  ${row.what}: ${formatMs(m.refresh)} ms`);
    }
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}
