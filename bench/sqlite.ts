/**
 * SQLite rows (BENCH_DB=sqlite): publish and relay through better-sqlite3, each beside the same
 * work in plain SQL on the plain driver, on identical tables (outboxer's own DDL). One writer:
 * SQLite has one. A fresh database file per trial.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Outboxer, batchRelay } from 'outboxer';
import { betterSqlite3, sqliteDialect } from 'outboxer/better-sqlite3';
import { judge, type BenchContext } from './context.js';
import { percent } from './report.js';
import { cpuMeter, describeCpu, groupKey, median, payload, rows, type CpuUse } from './support.js';

type SqliteContext = Pick<BenchContext, 'settings' | 'report' | 'log'>;
type Db = Database.Database;

const GROUPS = 10_000;
const TABLE = 'bench_messages';
const COLUMNS = '(outbox, partition, group_key, type, payload, headers)';
/** The columns outboxer's poll reads, so both sides move the same values. */
const POLL_COLUMNS =
  'id, partition, group_key, type, payload, headers, attempts, last_error, next_attempt_at, failing_since, inserted_at, status';

let directory: string | undefined;

function open(name: string): Db {
  directory ??= mkdtempSync(join(tmpdir(), 'outboxer-bench-'));
  const path = join(directory, `${name}.db`);
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  // What better-sqlite3 does in WAL mode anyway (it is built with SQLITE_DEFAULT_WAL_SYNCHRONOUS=1,
  // though PRAGMA synchronous still reads 2): commits are not fsynced one by one, checkpoints are.
  db.pragma('synchronous = NORMAL');
  return db;
}

function driverVersion(): string {
  try {
    const file = new URL('../node_modules/better-sqlite3/package.json', import.meta.url);
    return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
  } catch {
    return '?';
  }
}

export function sqliteEnvironment(): Array<[string, string]> {
  const probe = open('probe');
  const version = (probe.prepare('SELECT sqlite_version() AS v').get() as { v: string }).v;
  const synchronous = Number(probe.pragma('synchronous', { simple: true }));
  probe.close();
  const names = ['OFF', 'NORMAL', 'FULL', 'EXTRA'];
  return [
    ['Database', `SQLite ${version} through better-sqlite3 ${driverVersion()}, a file in ${tmpdir()}`],
    [
      'Database settings',
      `journal_mode WAL, synchronous ${names[synchronous] ?? synchronous} (what better-sqlite3 does in WAL mode by default: commits are not fsynced one by one, checkpoints are), everything else default`,
    ],
  ];
}

/** A database file with outboxer's table, and a publish-only or relaying instance on it. */
async function fresh(name: string, relay?: Parameters<typeof batchRelay>[0], batchSize = 100) {
  const db = open(name);
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
    relay: relay !== undefined,
    outboxes: { bench: { table: TABLE, batchSize, ...(relay ? { relay: batchRelay(relay) } : {}) } },
  });
  await outboxer.migrate();
  return { db, outboxer };
}

/** `count` ready rows (200-byte payloads, 10,000 groups) in one statement. */
function fill(db: Db, count: number): void {
  db.prepare(
    `WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < ?)
     INSERT INTO "${TABLE}" ${COLUMNS}
     SELECT 'bench', 0, 'order:' || (x % ${GROUPS}), NULL, '{"n":"' || printf('%010d', x) || '","pad":"${'x'.repeat(173)}"}', NULL FROM g`,
  ).run(count);
}

const randomKey = (): string => groupKey(Math.floor(Math.random() * GROUPS), GROUPS);

function perSecond(count: number, fn: () => void): number {
  const started = performance.now();
  fn();
  return count / ((performance.now() - started) / 1000);
}

async function alternate(
  trials: number,
  ours: () => Promise<number>,
  raw: () => Promise<number>,
): Promise<{ ours: number; raw: number; ratios: number[] }> {
  const o: number[] = [];
  const r: number[] = [];
  for (let trial = 0; trial < trials; trial += 1) {
    if (trial % 2 === 0) {
      r.push(await raw());
      o.push(await ours());
    } else {
      o.push(await ours());
      r.push(await raw());
    }
  }
  return { ours: median(o), raw: median(r), ratios: o.map((v, i) => v / r[i]!) };
}

const spread = (ratios: number[]): string =>
  ratios.length < 2
    ? ''
    : `; per-trial ratios ${percent(Math.min(...ratios))}–${percent(Math.max(...ratios))}`;

async function publishRows(ctx: SqliteContext): Promise<void> {
  const { settings, report } = ctx;
  const trials = settings.quick ? 1 : 5;
  const one = rows(settings, 5_000, 100);
  const single = await alternate(
    trials,
    async () => {
      const { db, outboxer } = await fresh('publish-ours');
      const publish = db.transaction((n: number) =>
        outboxer.publish(db, 'bench', payload(n), { groupKey: randomKey() }),
      );
      const result = perSecond(one, () => {
        for (let n = 0; n < one; n += 1) publish(n);
      });
      db.close();
      return result;
    },
    async () => {
      const { db } = await fresh('publish-raw');
      const insert = db.prepare(`INSERT INTO "${TABLE}" ${COLUMNS} VALUES (?, ?, ?, ?, ?, ?)`);
      const publish = db.transaction((n: number) =>
        insert.run('bench', 0, randomKey(), null, JSON.stringify(payload(n)), null),
      );
      const result = perSecond(one, () => {
        for (let n = 0; n < one; n += 1) publish(n);
      });
      db.close();
      return result;
    },
  );
  report.rows.push({
    group: 'Publish',
    what: 'Publish, 1 message per transaction (one writer: SQLite has one)',
    ours: { value: single.ours, unit: 'txn/s' },
    limit: {
      label: 'one-row INSERT per transaction (prepared statement)',
      figure: { value: single.raw, unit: 'txn/s' },
    },
    ofLimit: percent(single.ours / single.raw),
    note: `${one.toLocaleString('en-US')} transactions per trial, median of ${trials}${spread(single.ratios)}.`,
  });
  ctx.log(`  publish 1/txn: ${single.ours.toFixed(0)} vs ${single.raw.toFixed(0)} txn/s`);

  const txns = rows(settings, 500, 10);
  const values = Array.from({ length: 100 }, () => '(?, ?, ?, ?, ?, ?)').join(', ');
  const hundred = await alternate(
    trials,
    async () => {
      const { db, outboxer } = await fresh('publish100-ours');
      const publish = db.transaction((n: number) =>
        outboxer.publishMany(
          db,
          Array.from({ length: 100 }, (_, i) => ({
            outbox: 'bench',
            payload: payload(n * 100 + i),
            groupKey: randomKey(),
          })),
        ),
      );
      const result =
        100 *
        perSecond(txns, () => {
          for (let n = 0; n < txns; n += 1) publish(n);
        });
      db.close();
      return result;
    },
    async () => {
      const { db } = await fresh('publish100-raw');
      const insert = db.prepare(`INSERT INTO "${TABLE}" ${COLUMNS} VALUES ${values}`);
      const publish = db.transaction((n: number) => {
        const params: unknown[] = [];
        for (let i = 0; i < 100; i += 1)
          params.push('bench', 0, randomKey(), null, JSON.stringify(payload(n * 100 + i)), null);
        insert.run(...params);
      });
      const result =
        100 *
        perSecond(txns, () => {
          for (let n = 0; n < txns; n += 1) publish(n);
        });
      db.close();
      return result;
    },
  );
  report.rows.push({
    group: 'Publish',
    what: 'Publish, 100 messages per transaction',
    ours: { value: hundred.ours, unit: 'msg/s' },
    limit: {
      label: 'multi-row INSERT … VALUES (100 rows, prepared)',
      figure: { value: hundred.raw, unit: 'msg/s' },
    },
    ofLimit: percent(hundred.ours / hundred.raw),
    note: `${txns.toLocaleString('en-US')} transactions per trial, median of ${trials}${spread(hundred.ratios)}.`,
  });
  ctx.log(`  publish 100/txn: ${hundred.ours.toFixed(0)} vs ${hundred.raw.toFixed(0)} msg/s`);
}

/**
 * The plain relay loop on a fresh file of `count` ready rows: DELETE … RETURNING the poll's columns
 * in batches, with its own cursor; with `decode`, each row's payload and headers parsed.
 */
function plainLoop(count: number, batchSize: number, decode: boolean): { rate: number; cpu: CpuUse } {
  const db = open('relay-raw');
  for (const statement of sqliteDialect.schema({ schema: undefined, name: TABLE })) db.exec(statement);
  fill(db, count);
  db.exec(`ANALYZE`);
  const claim = db.prepare(
    `DELETE FROM "${TABLE}" WHERE id IN (SELECT id FROM "${TABLE}" WHERE outbox = ? AND partition = 0 AND status = 0 AND id > ? ORDER BY id LIMIT ?) RETURNING ${POLL_COLUMNS}`,
  );
  let delivered = 0;
  const cpu = cpuMeter();
  const rate = perSecond(count, () => {
    let last = 0;
    for (;;) {
      const batch = claim.all('bench', last, batchSize) as Array<Record<string, unknown> & { id: number }>;
      if (batch.length === 0) break;
      delivered += batch.length;
      for (const row of batch) {
        last = Math.max(last, row.id);
        if (decode) {
          row.payload = JSON.parse(row.payload as string);
          row.headers = row.headers === null ? {} : JSON.parse(row.headers as string);
        }
      }
    }
  });
  const used = cpu.stop();
  db.close();
  if (delivered !== count) throw new Error(`raw loop delivered ${delivered} of ${count}`);
  return { rate, cpu: used };
}

async function relayRows(ctx: SqliteContext): Promise<void> {
  const { settings, report } = ctx;
  const count = rows(settings, 100_000, 3_000);
  const trials = settings.quick ? 1 : 3;
  for (const batchSize of [100, 1000]) {
    let oursCpu: CpuUse | undefined;
    let rawCpu: CpuUse | undefined;
    const undecoded: number[] = [];
    const result = await alternate(
      trials,
      async () => {
        let delivered = 0;
        let done!: () => void;
        const finished = new Promise<void>((resolve) => (done = resolve));
        const { db, outboxer } = await fresh(
          'relay-ours',
          async (batch) => {
            delivered += batch.length;
            if (delivered >= count) done();
          },
          batchSize,
        );
        fill(db, count);
        db.exec(`ANALYZE`);
        const cpu = cpuMeter();
        const started = performance.now();
        await outboxer.start();
        await finished;
        await outboxer.stop();
        const elapsed = (performance.now() - started) / 1000;
        oursCpu = cpu.stop();
        const left = (
          db.prepare(`SELECT count(*) AS n FROM "${TABLE}" WHERE status < 3`).get() as { n: number }
        ).n;
        db.close();
        if (left !== 0) throw new Error(`outboxer left ${left} rows on SQLite`);
        return count / elapsed;
      },
      async () => {
        // The loop as the relay receives its rows: payload and headers decoded from their JSON text,
        // as pg decodes them for the Postgres plain loop. The same loop left undecoded runs first,
        // for the note.
        undecoded.push(plainLoop(count, batchSize, false).rate);
        const decoded = plainLoop(count, batchSize, true);
        rawCpu = decoded.cpu;
        return decoded.rate;
      },
    );
    const ratio = result.ours / result.raw;
    const bare = median(undecoded);
    report.rows.push({
      group: 'Relay',
      what: `Relay, \`batchSize: ${batchSize}\``,
      ours: { value: result.ours, unit: 'msg/s' },
      limit: {
        label: `DELETE … RETURNING loop, LIMIT ${batchSize}, payloads decoded`,
        figure: { value: result.raw, unit: 'msg/s' },
      },
      ofLimit: percent(ratio),
      ...(batchSize === 100
        ? {
            target: {
              text: '≥ 70% of the limit',
              measured: percent(ratio),
              met: judge(ctx as BenchContext, ratio >= 0.7),
            },
          }
        : {}),
      note: `${count.toLocaleString('en-US')} rows drained per trial, median of ${trials}${spread(result.ratios)}; CPU in the last trial: outboxer ${describeCpu(oursCpu)}, plain loop ${describeCpu(rawCpu)}. The plain loop JSON.parse()s each row's payload and headers, as the relay receives them and as pg does for the Postgres loop; the same loop leaving them as text: ${Math.round(bare).toLocaleString('en-US')} msg/s, outboxer ${percent(result.ours / bare)} of it.`,
    });
    ctx.log(`  relay batch ${batchSize}: ${result.ours.toFixed(0)} vs ${result.raw.toFixed(0)} msg/s`);
  }
}

export async function sqliteRows(ctx: SqliteContext): Promise<void> {
  try {
    if (ctx.settings.only === undefined || ctx.settings.only.includes('publish')) await publishRows(ctx);
    if (ctx.settings.only === undefined || ctx.settings.only.includes('relay')) await relayRows(ctx);
  } finally {
    if (directory !== undefined) rmSync(directory, { recursive: true, force: true });
    directory = undefined;
  }
}
