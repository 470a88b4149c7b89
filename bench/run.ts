/**
 * `npm run bench`: outboxer against a real database, every row of the spec's table, beside the
 * same work in plain SQL (the database's own limit) and beside the libraries users pick instead.
 *
 *   npm run bench                    Postgres (postgres://postgres@127.0.0.1:5432/outboxer_bench)
 *   BENCH_DB=sqlite npm run bench    SQLite (better-sqlite3, WAL, a file in the temp directory)
 *   BENCH_SCALE=5 npm run bench      five times the rows
 *   BENCH_PLANS=1 npm run bench      also print the Postgres plans of the poll, acknowledge, counts
 *   BENCH_QUICK=1 npm run bench      a smoke run (tiny counts, < 2 minutes): completes, judges nothing
 *
 * Also: BENCH_ONLY=publish,relay,poll,latency,memory,peers,dashboard,inbox (a subset), BENCH_OUT=<file> (where the
 * report goes; default docs/benchmarks.md, or outboxer-benchmarks-quick-<db>.md in the temp directory
 * for quick runs),
 * BENCH_DATABASE_URL. Exits non-zero when a group of rows failed.
 */
import { readFileSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchContext } from './context.js';
import { dashboardRows } from './dashboard.js';
import { inboxRows } from './inbox.js';
import { latencyRows } from './latency.js';
import { memoryRows } from './memory.js';
import { peerRows } from './peers.js';
import { pollRows } from './poll.js';
import { publishRows } from './publish.js';
import { relayRows } from './relay.js';
import { renderReport, writeReport, type Report } from './report.js';
import { sqliteRows, sqliteEnvironment } from './sqlite.js';
import { ensureDatabase, makePool, readSettings } from './support.js';

const root = fileURLToPath(new URL('..', import.meta.url));

function packageVersion(name: string): string {
  try {
    const file = name === 'outboxer' ? `${root}package.json` : `${root}node_modules/${name}/package.json`;
    return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
  } catch {
    return 'not installed';
  }
}

function machine(): Array<[string, string]> {
  const cpus = os.cpus();
  return [
    ['Date', new Date().toISOString()],
    [
      'Machine',
      `${cpus.length} cores (${cpus[0]?.model ?? 'unknown CPU'}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB memory, ${os.type()} ${os.release()}`,
    ],
    ['Runtime', `Node ${process.version}, outboxer ${packageVersion('outboxer')}`],
    [
      'Load at start',
      `load average ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(
          ' / ',
        )} (1 / 5 / 15 min) on ${cpus.length} cores: other work shares this machine and its Postgres`,
    ],
  ];
}

const POSTGRES_SETTINGS = [
  'shared_buffers',
  'synchronous_commit',
  'fsync',
  'wal_level',
  'max_wal_size',
  'checkpoint_timeout',
  'work_mem',
  'max_parallel_workers_per_gather',
  'jit',
  'autovacuum',
];

async function postgresEnvironment(ctx: BenchContext): Promise<Array<[string, string]>> {
  const { rows: version } = await ctx.pool.query('SELECT version() AS v');
  const { rows: settings } = await ctx.pool.query(
    'SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1) ORDER BY name',
    [POSTGRES_SETTINGS],
  );
  const shown = settings.map((s: { name: string; setting: string; unit: string | null }) => {
    if (s.unit === '8kB') return `${s.name} ${(Number(s.setting) * 8) / 1024} MB`;
    if (s.unit === 'kB') return `${s.name} ${Number(s.setting) / 1024} MB`;
    if (s.unit === 'MB') return `${s.name} ${s.setting} MB`;
    return `${s.name} ${s.setting}${s.unit ? ` ${s.unit}` : ''}`;
  });
  return [
    [
      'Database',
      `${String(version[0].v).split(',')[0]} on the same machine (local TCP), database outboxer_bench`,
    ],
    ['Database settings', `${shown.join(', ')} (server defaults otherwise)`],
    [
      'Drivers',
      `pg ${packageVersion('pg')}; peers: pg-boss ${packageVersion('pg-boss')}, pg-transactional-outbox ${packageVersion('pg-transactional-outbox')}`,
    ],
  ];
}

type Group = readonly [name: string, run: (ctx: BenchContext) => Promise<void>];

const POSTGRES_GROUPS: Group[] = [
  ['publish', publishRows],
  ['relay', relayRows],
  ['poll', pollRows],
  ['latency', latencyRows],
  ['memory', memoryRows],
  ['peers', peerRows],
  ['dashboard', dashboardRows],
  ['inbox', inboxRows],
];

async function main(): Promise<number> {
  const settings = readSettings();
  const started = performance.now();
  const report: Report = {
    db: settings.db,
    environment: [],
    rows: [],
    peers: [],
    plans: [],
    notes: [],
    durationSeconds: 0,
  };
  const log = (message: string): void => console.log(message);
  let failures = 0;
  const scaleNote: Array<[string, string]> = [
    [
      'Run',
      `BENCH_SCALE=${settings.scale}${settings.quick ? ', BENCH_QUICK=1' : ''}${settings.plans ? ', BENCH_PLANS=1' : ''}; payloads of 200 bytes; a relay that only counts`,
    ],
  ];

  if (settings.db === 'sqlite') {
    const environment = [...machine(), ...sqliteEnvironment(), ...scaleNote];
    (report.environment as Array<[string, string]>).push(...environment);
    try {
      await sqliteRows({ settings, report, log });
    } catch (error) {
      failures += 1;
      report.rows.push({ group: 'sqlite', what: 'SQLite rows', skipped: `failed: ${String(error)}` });
      console.error(error);
    }
  } else {
    await ensureDatabase(settings.url);
    const pool = makePool(settings.url, 24);
    const ctx: BenchContext = { settings, pool, report, figures: new Map(), log };
    try {
      (report.environment as Array<[string, string]>).push(
        ...machine(),
        ...(await postgresEnvironment(ctx)),
        ...scaleNote,
      );
      for (const [name, run] of POSTGRES_GROUPS) {
        if (settings.only !== undefined && !settings.only.includes(name)) continue;
        log(`== ${name}`);
        const groupStarted = performance.now();
        try {
          await run(ctx);
        } catch (error) {
          failures += 1;
          report.rows.push({ group: name, what: `${name} rows`, skipped: `failed: ${String(error)}` });
          console.error(error);
        }
        log(`   (${((performance.now() - groupStarted) / 1000).toFixed(0)} s)`);
      }
    } finally {
      await pool.end();
    }
  }

  (report as { durationSeconds: number }).durationSeconds = (performance.now() - started) / 1000;
  (report.environment as Array<[string, string]>).push([
    'Load at end',
    `load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' / ')}`,
  ]);
  const body = renderReport(report, { quick: settings.quick });
  console.log(`\n${body}\n`);
  const out =
    settings.out ??
    (settings.quick
      ? join(tmpdir(), `outboxer-benchmarks-quick-${settings.db}.md`)
      : `${root}docs/benchmarks.md`);
  writeReport(out, settings.db, body);
  console.log(`Written to ${out}`);
  return failures;
}

main().then(
  (failures) => {
    process.exitCode = failures > 0 ? 1 : 0;
  },
  (error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  },
);
