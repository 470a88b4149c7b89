/**
 * A/B of SQLite's tally triggers, in one process: the same outboxer work on a fresh file with the
 * triggers (as `migrate()` leaves it) and with them dropped, trials alternating so that a loaded
 * machine's drift falls on both arms. Rates are per second of this process's CPU time (user and
 * system; better-sqlite3 runs SQLite in the process), which a machine shared with other work
 * disturbs far less than wall time. `npx tsx bench/sqlite-tallies-ab.ts [trials]`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Outboxer, batchRelay } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { median, payload } from './support.js';

/** Seconds of this process's CPU time (user and system) since `from`. */
const cpuSince = (from: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(from);
  return (used.user + used.system) / 1e6;
};

const TABLE = 'ab_messages';
const directory = mkdtempSync(join(tmpdir(), 'outboxer-ab-'));

async function open(name: string, triggers: boolean) {
  const path = join(directory, `${name}.db`);
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
    testing: 'manual',
    logger: false,
    outboxes: {
      bench: { table: TABLE, batchSize: 100, relay: batchRelay(async (b) => b.map(() => ({ ok: true }))) },
    },
  });
  await outboxer.migrate();
  if (!triggers)
    for (const t of ['insert', 'update', 'delete']) db.exec(`DROP TRIGGER "${TABLE}_tally_${t}"`);
  return { db, outboxer };
}

async function trial(triggers: boolean) {
  const { db, outboxer } = await open(triggers ? 'on' : 'off', triggers);
  const one = db.transaction((n: number) =>
    outboxer.publish(db, 'bench', payload(n), { groupKey: `g${n % 1000}` }),
  );
  let started = process.cpuUsage();
  for (let n = 0; n < 3000; n += 1) one(n);
  const single = 3000 / cpuSince(started);
  const many = db.transaction((n: number) =>
    outboxer.publishMany(
      db,
      Array.from({ length: 100 }, (_, i) => ({
        outbox: 'bench',
        payload: payload(n * 100 + i),
        groupKey: `g${i % 1000}`,
      })),
    ),
  );
  started = process.cpuUsage();
  for (let n = 0; n < 300; n += 1) many(n);
  const hundred = 30_000 / cpuSince(started);
  started = process.cpuUsage();
  const drained = await outboxer.drain('bench', { maxRounds: 1000 });
  const relay = drained.delivered.length / cpuSince(started);
  await outboxer.close();
  db.close();
  return { single, hundred, relay };
}

const trials = Number(process.argv[2] ?? 8);
const results = {
  on: [] as Array<Awaited<ReturnType<typeof trial>>>,
  off: [] as Array<Awaited<ReturnType<typeof trial>>>,
};
for (let i = 0; i < trials; i += 1) {
  for (const triggers of i % 2 === 0 ? [true, false] : [false, true]) {
    results[triggers ? 'on' : 'off'].push(await trial(triggers));
  }
}
for (const key of ['single', 'hundred', 'relay'] as const) {
  const on = median(results.on.map((r) => r[key]));
  const off = median(results.off.map((r) => r[key]));
  const ratios = results.on.map((r, i) => r[key] / results.off[i]![key]).sort((a, b) => a - b);
  console.log(
    `${key}: with triggers ${on.toFixed(0)}/CPU-s, without ${off.toFixed(0)}/CPU-s, ratio of medians ${(on / off).toFixed(3)}, per-trial ratios ${ratios.map((r) => r.toFixed(2)).join(' ')}`,
  );
}
rmSync(directory, { recursive: true, force: true });
