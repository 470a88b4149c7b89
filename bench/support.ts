/**
 * Shared pieces of the benchmark: settings from the environment, payloads, timing, CPU accounting
 * and Postgres fixtures. Nothing here knows about a particular row.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { hashGroupKey, type SqlQuery } from 'outboxer';

export interface BenchSettings {
  readonly db: 'postgres' | 'sqlite';
  /** Row counts are multiplied by this. */
  readonly scale: number;
  /** Print (and record) the Postgres plans of the poll, the acknowledge and counts. */
  readonly plans: boolean;
  /** A smoke run with tiny counts: checks that every row completes, says nothing about speed. */
  readonly quick: boolean;
  /** Only these groups (publish, relay, poll (with counts and prune), latency, memory, peers; sqlite). */
  readonly only: readonly string[] | undefined;
  /** Where the report goes; default docs/benchmarks.md (full runs) or .tmp/ (quick runs). */
  readonly out: string | undefined;
  /** The benchmark's own database (created when missing). */
  readonly url: string;
}

export function readSettings(env: NodeJS.ProcessEnv = process.env): BenchSettings {
  const db = env.BENCH_DB ?? 'postgres';
  if (db !== 'postgres' && db !== 'sqlite') throw new Error(`BENCH_DB must be postgres or sqlite; got ${db}`);
  const scale = Number(env.BENCH_SCALE ?? 1);
  if (!(scale > 0)) throw new Error(`BENCH_SCALE must be a positive number; got ${env.BENCH_SCALE}`);
  return {
    db,
    scale,
    plans: env.BENCH_PLANS === '1',
    quick: env.BENCH_QUICK === '1',
    only: env.BENCH_ONLY ? env.BENCH_ONLY.split(',').map((s) => s.trim()) : undefined,
    out: env.BENCH_OUT,
    url: env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/outboxer_bench',
  };
}

/** A row count: `base × BENCH_SCALE`, or `quick` in a smoke run. */
export function rows(settings: BenchSettings, base: number, quick: number): number {
  return settings.quick ? quick : Math.max(1, Math.round(base * settings.scale));
}

// ---------------------------------------------------------------------------------------------
// Payloads: every message carries exactly 200 bytes of JSON, in JS and in SQL fills alike.

const PAD = 'x'.repeat(173);

/** `{"n":"0000000042","pad":"xxx…"}`: 200 bytes once encoded. */
export function payload(n: number): { n: string; pad: string } {
  return { n: String(n).padStart(10, '0'), pad: PAD };
}

/** The same 200-byte document built in SQL from an integer expression. */
export function sqlPayload(expression: string): string {
  return `('{"n":"' || lpad((${expression})::text, 10, '0') || '","pad":"' || repeat('x', 173) || '"}')`;
}

/** Group keys used everywhere: `order:0` … `order:<groups-1>`. */
export function groupKey(n: number, groups: number): string {
  return `order:${n % groups}`;
}

/** The partition outboxer computes for each of those group keys (FNV-1a, as the engine does). */
export function partitionsOfGroups(groups: number, partitions: number): number[] {
  return Array.from({ length: groups }, (_, k) => hashGroupKey(`order:${k}`) % partitions);
}

// ---------------------------------------------------------------------------------------------
// Statistics and timing

export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[index]!;
}

export const median = (values: readonly number[]): number => quantile(values, 0.5);

export async function seconds<T>(fn: () => Promise<T>): Promise<{ value: T; seconds: number }> {
  const started = performance.now();
  const value = await fn();
  return { value, seconds: (performance.now() - started) / 1000 };
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// CPU: how busy the machine and this process were while a row ran, to tell our limits from the
// machine's (2 cores shared by Node and Postgres).

interface ProcStat {
  busy: number;
  total: number;
}

function readProcStat(): ProcStat | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const fields = line.trim().split(/\s+/).slice(1).map(Number);
    const total = fields.slice(0, 8).reduce((a, b) => a + b, 0);
    const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
    return { busy: total - idle, total };
  } catch {
    return undefined;
  }
}

export interface CpuUse {
  /** Share of all cores that were busy (0..1). */
  machine: number | undefined;
  /** This Node process, in cores (1 = one core fully used). */
  node: number;
}

export function cpuMeter(): { stop(): CpuUse } {
  const stat = readProcStat();
  const usage = process.cpuUsage();
  const started = performance.now();
  return {
    stop() {
      const end = readProcStat();
      const used = process.cpuUsage(usage);
      const elapsedUs = (performance.now() - started) * 1000;
      const machine =
        stat && end && end.total > stat.total ? (end.busy - stat.busy) / (end.total - stat.total) : undefined;
      return { machine, node: (used.user + used.system) / elapsedUs };
    },
  };
}

export function describeCpu(cpu: CpuUse | undefined): string {
  if (cpu === undefined) return '';
  const machine = cpu.machine === undefined ? '' : `machine ${(cpu.machine * 100).toFixed(0)}% busy, `;
  return `${machine}Node ${(cpu.node * 100).toFixed(0)}% of a core`;
}

// ---------------------------------------------------------------------------------------------
// Postgres

/** Creates the benchmark database when it does not exist (through the server's `postgres` db). */
export async function ensureDatabase(url: string): Promise<void> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.slice(1));
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`Unexpected benchmark database name ${name}`);
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    const { rows } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rows.length === 0) await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
}

export function makePool(url: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => undefined); // an idle client dropped by the server; the next query reconnects
  return pool;
}

/** Drops a message table, its companions (`_leases`, `_nodes`, `_config`, `_tallies`) and its TRUNCATE trigger's function. */
export async function dropTables(pool: pg.Pool, table: string): Promise<void> {
  await pool.query(
    `DROP TABLE IF EXISTS "${table}", "${table}_leases", "${table}_nodes", "${table}_config", "${table}_tallies" CASCADE`,
  );
  await pool.query(`DROP FUNCTION IF EXISTS "${table}_truncated"()`);
}

export interface FillOptions {
  readonly table: string;
  readonly outbox: string;
  readonly count: number;
  /** Group keys `order:0…groups-1`, assigned round-robin. */
  readonly groups: number;
  readonly partitions: number;
  /** Id offset of the generated `n` values (payload numbering). */
  readonly from?: number;
  /** Status of the rows: 0 ready (default), 2 held, 4 delivered. */
  readonly status?: number;
  /** SQL for `delivered_at` (status 4). */
  readonly deliveredAt?: string;
  /** A fixed group key instead of the round-robin ones. */
  readonly fixedGroupKey?: string;
}

/**
 * Fills a message table the way outboxer's publish would (same columns, same partition for each
 * group key, 200-byte payloads), but in bulk SQL so that a million rows take seconds.
 */
export async function fill(pool: pg.Pool, o: FillOptions): Promise<void> {
  const chunk = 250_000;
  // Tallied as publish tallies (one row a statement and partition), where the table has tallies.
  const tallies = `"${o.table}_tallies"`;
  const [{ tallied }] = (await pool.query(`SELECT to_regclass($1) IS NOT NULL AS tallied`, [tallies]))
    .rows as [{ tallied: boolean }];
  // Every row has the same status: its count goes to its figure (pending, dead, delivered).
  const status = o.status ?? 0;
  const figures = [status < 3, status === 3, status === 4]
    .map((mine) => (mine ? 'count(*)' : '0'))
    .join(', ');
  const parts = partitionsOfGroups(o.groups, o.partitions);
  const from = o.from ?? 0;
  for (let start = 0; start < o.count; start += chunk) {
    const end = Math.min(o.count, start + chunk);
    const values: unknown[] = [o.outbox, from + start, from + end - 1, o.status ?? 0];
    let partition: string;
    let key: string;
    if (o.fixedGroupKey !== undefined) {
      values.push(hashGroupKey(o.fixedGroupKey) % o.partitions, o.fixedGroupKey);
      partition = '$5::int';
      key = '$6::text';
    } else {
      values.push(o.groups, parts);
      partition = '($6::int[])[(g % $5) + 1]';
      key = `'order:' || (g % $5)`;
    }
    const insert = `INSERT INTO "${o.table}" (outbox, partition, group_key, type, payload, headers, status, delivered_at)
       SELECT $1, ${partition}, ${key}, NULL, ${sqlPayload('g')}::json, NULL, $4::smallint, ${o.deliveredAt ?? 'NULL'}
       FROM generate_series($2::bigint, $3::bigint) AS g`;
    await pool.query(
      tallied
        ? `WITH filled AS (${insert} RETURNING partition)
           INSERT INTO ${tallies} (outbox, partition, pending, dead, delivered)
           SELECT $1, partition, ${figures} FROM filled GROUP BY partition`
        : insert,
      values,
    );
  }
}

/** VACUUM (ANALYZE): sets hint bits and the visibility map, as autovacuum would on a settled table. */
export async function vacuum(pool: pg.Pool, table: string): Promise<void> {
  await pool.query(`VACUUM (ANALYZE) "${table}"`);
}

export interface StatementTiming {
  p50: number;
  p95: number;
  iterations: number;
}

/** Runs one statement `iterations` times on one connection (after a warm-up); milliseconds. */
export async function timeStatement(
  pool: pg.Pool,
  query: SqlQuery,
  iterations: number,
  warmup = 10,
): Promise<StatementTiming> {
  const client = await pool.connect();
  try {
    const times: number[] = [];
    // As the pg adapter sends it: a statement the dialect marks `prepare` is a named one, which
    // Postgres plans for its values five times and then runs on its generic plan.
    const name =
      query.prepare === true
        ? `bench_${createHash('sha256').update(query.text).digest('hex').slice(0, 24)}`
        : undefined;
    for (let i = 0; i < warmup + iterations; i += 1) {
      const started = performance.now();
      await client.query({ name, text: query.text, values: query.values as unknown[] });
      if (i >= warmup) times.push(performance.now() - started);
    }
    return { p50: median(times), p95: quantile(times, 0.95), iterations };
  } finally {
    client.release();
  }
}

/** The server's own execution time of a statement (median of `EXPLAIN ANALYZE` runs), rolled back. */
export async function serverTime(pool: pg.Pool, query: SqlQuery, iterations = 15): Promise<number> {
  const client = await pool.connect();
  try {
    const times: number[] = [];
    for (let i = 0; i < iterations; i += 1) {
      await client.query('BEGIN');
      const { rows } = await client.query(
        `EXPLAIN (ANALYZE, TIMING OFF) ${query.text}`,
        query.values as unknown[],
      );
      await client.query('ROLLBACK');
      const last = String(rows.at(-1)?.['QUERY PLAN'] ?? '');
      times.push(Number(/Execution Time: ([0-9.]+) ms/.exec(last)?.[1] ?? NaN));
    }
    return median(times);
  } finally {
    client.release();
  }
}

/** `EXPLAIN (ANALYZE, BUFFERS)` of a statement; rolled back, so a DELETE deletes nothing. */
export async function explain(pool: pg.Pool, query: SqlQuery): Promise<string> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query(
      `EXPLAIN (ANALYZE, BUFFERS) ${query.text}`,
      query.values as unknown[],
    );
    return rows.map((row: Record<string, unknown>) => String(row['QUERY PLAN'])).join('\n');
  } finally {
    await client.query('ROLLBACK').catch(() => undefined);
    client.release();
  }
}

/** Runs `count` transactions over `writers` connections, each a loop; returns transactions/s. */
export async function transactionsPerSecond(
  pool: pg.Pool,
  writers: number,
  count: number,
  body: (client: pg.PoolClient, n: number) => Promise<unknown>,
): Promise<number> {
  const clients = await Promise.all(Array.from({ length: writers }, () => pool.connect()));
  let issued = 0;
  try {
    const started = performance.now();
    await Promise.all(
      clients.map(async (client) => {
        while (issued < count) {
          const n = issued++;
          await client.query('BEGIN');
          try {
            await body(client, n);
            await client.query('COMMIT');
          } catch (error) {
            await client.query('ROLLBACK');
            throw error;
          }
        }
      }),
    );
    return count / ((performance.now() - started) / 1000);
  } finally {
    for (const client of clients) client.release();
  }
}
