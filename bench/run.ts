/**
 * `npm run bench`: outboxer against a real database, every row of the spec's table, beside the
 * same work in plain SQL (the database's own limit) and beside the libraries users pick instead.
 *
 *   npm run bench                    Postgres (postgres://postgres@127.0.0.1:5432/outboxer_bench)
 *   BENCH_DB=mysql npm run bench     MySQL or MariaDB through mysql2 (mysql://root@127.0.0.1:3306/
 *                                    outboxer_bench, created for the run and dropped after it)
 *   BENCH_DB=sqlite npm run bench    SQLite (better-sqlite3, WAL, a file in the temp directory)
 *   BENCH_SCALE=5 npm run bench      five times the rows
 *   BENCH_PLANS=1 npm run bench      also print the plans of the poll, acknowledge, counts, prune
 *   BENCH_QUICK=1 npm run bench      a smoke run (tiny counts, < 2 minutes): completes, judges nothing
 *
 * Postgres and MySQL run the same rows (publish, relay, poll with counts and prune, latency, idle:
 * the statements an idle node sends), each beside its own plain SQL (bench/postgres.ts,
 * bench/mysql.ts); memory, peers, dashboard and inbox run on Postgres only (the dashboard also on
 * SQLite), as does scaleout (processes sharing an outbox, hand-over). Also:
 * BENCH_ONLY=publish,relay,poll,latency,memory,peers,dashboard,inbox,inbox-store,brokers,idle,scaleout
 * (a subset),
 * BENCH_BROKERS=nats,kafkajs (only the broker rows whose name contains one of these)
 * BENCH_OUT=<file> (where the report goes; default docs/benchmarks.md, each database between its
 * own markers, or outboxer-benchmarks-quick-<db>.md in the temp directory for quick runs),
 * BENCH_DATABASE_URL. Exits non-zero when a group of rows failed.
 */
import os, { tmpdir } from 'node:os';
import type pg from 'pg';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brokerRows } from './brokers.js';
import type { BenchContext } from './context.js';
import { dashboardRows } from './dashboard.js';
import { sqliteDashboardRows } from './dashboard-sqlite.js';
import { idleRows } from './idle.js';
import { inboxRows, inboxStoreRows } from './inbox.js';
import type { BenchDatabase } from './database.js';
import { latencyRows } from './latency.js';
import { memoryRows } from './memory.js';
import { openMysql } from './mysql.js';
import { peerRows } from './peers.js';
import { pollRows } from './poll.js';
import { openPostgres, type PostgresBench } from './postgres.js';
import { publishRows } from './publish.js';
import { relayRows } from './relay.js';
import { scaleOutRows } from './scale-out.js';
import { renderReport, writeReport, type Report } from './report.js';
import { sqliteRows, sqliteEnvironment } from './sqlite.js';
import { packageVersion, readSettings } from './support.js';

const root = fileURLToPath(new URL('..', import.meta.url));

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
        )} (1 / 5 / 15 min) on ${cpus.length} cores: other work shares this machine and its database servers`,
    ],
  ];
}

type Group<Db extends BenchDatabase<unknown>> = readonly [
  name: string,
  run: (ctx: BenchContext<Db>) => Promise<void>,
];

/** The groups every database runs: the same rows, each beside that database's plain SQL. */
function commonGroups<Tx>(): Array<Group<BenchDatabase<Tx>>> {
  return [
    ['publish', publishRows],
    ['relay', relayRows],
    ['poll', pollRows],
    ['latency', latencyRows],
    ['idle', idleRows],
  ];
}

/**
 * Postgres only: the memory row's child process, the peers (Postgres libraries), the dashboard, the
 * inbox, the relays into real brokers (Kafka, SQS, RabbitMQ, NATS, Redis, BullMQ, a webhook),
 * scale-out.
 */
const POSTGRES_GROUPS: Array<Group<PostgresBench>> = [
  ['memory', memoryRows],
  ['peers', peerRows],
  ['dashboard', dashboardRows],
  ['inbox', inboxRows],
  ['inbox-store', inboxStoreRows],
  ['brokers', brokerRows],
  ['scaleout', scaleOutRows],
];

/** Runs each selected group; returns how many failed (each failure is a row of the report). */
async function runGroups<Db extends BenchDatabase<unknown>>(
  ctx: BenchContext<Db>,
  groups: ReadonlyArray<Group<Db>>,
): Promise<number> {
  let failures = 0;
  for (const [name, run] of groups) {
    if (ctx.settings.only !== undefined && !ctx.settings.only.includes(name)) continue;
    ctx.log(`== ${name}`);
    const groupStarted = performance.now();
    try {
      await run(ctx);
    } catch (error) {
      failures += 1;
      ctx.report.rows.push({ group: name, what: `${name} rows`, skipped: `failed: ${String(error)}` });
      console.error(error);
    }
    ctx.log(`   (${((performance.now() - groupStarted) / 1000).toFixed(0)} s)`);
  }
  return failures;
}

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
    // BENCH_ONLY=dashboard runs the dashboard's rows alone; any other selection, the rest.
    const only = settings.only;
    const steps: Array<[string, () => Promise<void>]> = [
      ...(only === undefined || only.some((name) => name !== 'dashboard')
        ? [['SQLite rows', () => sqliteRows({ settings, report, log })] as [string, () => Promise<void>]]
        : []),
      ...(only === undefined || only.includes('dashboard')
        ? [
            ['dashboard rows', () => sqliteDashboardRows({ settings, report, log })] as [
              string,
              () => Promise<void>,
            ],
          ]
        : []),
    ];
    for (const [what, step] of steps) {
      try {
        await step();
      } catch (error) {
        failures += 1;
        report.rows.push({ group: 'sqlite', what, skipped: `failed: ${String(error)}` });
        console.error(error);
      }
    }
  } else {
    const db = settings.db === 'mysql' ? await openMysql(settings.url) : await openPostgres(settings.url);
    (report as { title: string }).title = db.title;
    try {
      (report.environment as Array<[string, string]>).push(
        ...machine(),
        ...(await db.environment()),
        ...scaleNote,
      );
      const figures = new Map<string, number>();
      if (db.kind === 'postgres') {
        const ctx: BenchContext<PostgresBench> = { settings, db, report, figures, log };
        failures += await runGroups(ctx, [...commonGroups<pg.PoolClient>(), ...POSTGRES_GROUPS]);
      } else {
        failures += await runGroups({ settings, db, report, figures, log }, commonGroups());
      }
    } finally {
      await db.close();
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
