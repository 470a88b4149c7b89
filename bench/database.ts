/**
 * The seam between the benchmark's rows and a database server. The rows (publish.ts, relay.ts,
 * poll.ts, latency.ts) are written once against {@link BenchDatabase}; bench/postgres.ts and
 * bench/mysql.ts implement it, each with its fixtures (bulk fills, statistics, plans, server
 * times) and the plain SQL every row is measured against ({@link PlainSql}: the database's own
 * limit on the plain driver), so that a row's baseline sits beside its dialect's statements.
 */
import type { DatabaseAdapter, Dialect, Row, SqlQuery } from 'outboxer';
import { median, quantile } from './support.js';

/** One pooled connection of the driver, as a writer or a plain loop holds it. */
export interface BenchConnection<Tx> {
  /** The driver's own connection, as `Outboxer.publish` takes it inside a transaction. */
  readonly tx: Tx;
  /** Runs one statement as the driver sends it (`?` or `$n` placeholders, per database). */
  query(text: string, values?: readonly unknown[]): Promise<Row[]>;
  release(): void;
}

export interface FillOptions {
  readonly table: string;
  readonly outbox: string;
  readonly count: number;
  /** Group keys `<keyPrefix>0…groups-1`, assigned round-robin. */
  readonly groups: number;
  /** Default `order:`. */
  readonly keyPrefix?: string;
  readonly partitions: number;
  /** Id offset of the generated `n` values (payload numbering). */
  readonly from?: number;
  /** Status of the rows: 0 ready (default), 2 held, 3 dead, 4 delivered. */
  readonly status?: number;
  /** For delivered rows: how long ago they were delivered (default: now). */
  readonly deliveredSecondsAgo?: number;
  /** A fixed group key instead of the round-robin ones. */
  readonly fixedGroupKey?: string;
}

export interface StatementTiming {
  p50: number;
  p95: number;
  iterations: number;
}

/** A relay batch of the plain loop: claims up to `limit` ready rows after `afterId` and removes them. */
export interface PlainClaim {
  readonly table: string;
  readonly partition: number;
  readonly afterId: number;
  readonly limit: number;
  /** Keep the rows as delivered (`retention: { keep }`) rather than delete them. */
  readonly keep: boolean;
}

/**
 * The plain-SQL side of each row, in the database's own dialect, with the label the report shows.
 * Row values are outboxer's columns in order: outbox, partition, group key, type, payload, headers.
 */
export interface PlainSql {
  /** The one-row INSERT of outboxer's columns: the limit of a single-message publish. */
  insert(table: string, row: readonly unknown[]): SqlQuery[];
  /** One multi-row `INSERT … VALUES`. */
  insertMany(table: string, rows: ReadonlyArray<readonly unknown[]>): SqlQuery[];
  /** The insert with the lock `serializeWrites` takes on this database, and its label. */
  readonly locked: { readonly label: string; insert(table: string, row: readonly unknown[]): SqlQuery[] };
  /** The insert with a notification (databases with NOTIFY only). */
  readonly notified?: { readonly label: string; insert(table: string, row: readonly unknown[]): SqlQuery[] };
  /** The label of the plain relay loop. */
  claimLabel(keep: boolean): string;
  /** One batch of the plain relay loop, on one connection: the rows claimed, in id order. */
  claim(connection: BenchConnection<unknown>, claim: PlainClaim): Promise<Row[]>;
  /** The plain head of partition 0: ready rows in id order (after `afterId`), 100, the poll's columns. */
  head(table: string, afterId?: number): SqlQuery;
  /** The grouped count(*) `counts()` is measured against. */
  groupedCount(table: string): SqlQuery;
  /** One DELETE of every delivered row older than the window. */
  prune(table: string, olderThanSeconds: number): SqlQuery;
  /** `count` tally rows of partition 0 that sum to zero: what a relay tick leaves uncompacted. */
  zeroTallies(table: string, outbox: string, count: number): SqlQuery;
}

export interface BenchDatabase<Tx> {
  readonly kind: 'postgres' | 'mysql';
  /** The report's section title: the server that ran (`PostgreSQL`, `MariaDB`, `MySQL`). */
  readonly title: string;
  readonly dialect: Dialect;
  readonly url: string;
  readonly plain: PlainSql;
  /** outboxer's adapter on the benchmark's pool. */
  adapter(): DatabaseAdapter<Tx, false>;
  query(text: string, values?: readonly unknown[]): Promise<Row[]>;
  connect(): Promise<BenchConnection<Tx>>;
  /** A table name quoted for this database's SQL. */
  quote(name: string): string;
  /** Server version and settings, for the report. */
  environment(): Promise<Array<[string, string]>>;
  /** Drops a message table and its companions. */
  dropTables(table: string): Promise<void>;
  truncate(tables: readonly string[]): Promise<void>;
  /** Flushes what earlier work left to write, so that it does not land on the next trial. */
  checkpoint(): Promise<void>;
  /** Fills a message table in bulk SQL with the rows `publish` writes, tallied as publish tallies. */
  fill(options: FillOptions): Promise<void>;
  /** Leaves a table as the server's background upkeep would, with fresh statistics; what it did. */
  vacuum(table: string): Promise<string>;
  /** The last id a message table's sequence handed out (the engine's cursor after a drain). */
  lastDrawnId(table: string): Promise<number>;
  /** One statement `iterations` times on one connection, after a warm-up; milliseconds. */
  timeStatement(query: SqlQuery, iterations: number, warmup?: number): Promise<StatementTiming>;
  /** The server's own time for statements run in one transaction, rolled back; median, ms. */
  serverTime(queries: readonly SqlQuery[], iterations?: number): Promise<number>;
  /** How `serverTime` measures, for the notes. */
  readonly serverTimeLabel: string;
  /** A connection that LISTENs on `channel` (databases with NOTIFY only), counting what it receives. */
  listen?(channel: string): Promise<{ received(): number; close(): Promise<void> }>;
  /** The plans of statements run in one transaction, rolled back (a DELETE deletes nothing). */
  explain(queries: readonly SqlQuery[]): Promise<string>;
  close(): Promise<void>;
}

/** Runs `count` transactions over `writers` connections, each a loop; returns transactions/s. */
export async function transactionsPerSecond<Tx>(
  db: BenchDatabase<Tx>,
  writers: number,
  count: number,
  body: (connection: BenchConnection<Tx>, n: number) => Promise<unknown>,
): Promise<number> {
  const connections = await Promise.all(Array.from({ length: writers }, () => db.connect()));
  let issued = 0;
  try {
    const started = performance.now();
    await Promise.all(
      connections.map(async (connection) => {
        while (issued < count) {
          const n = issued++;
          await connection.query('BEGIN');
          try {
            await body(connection, n);
            await connection.query('COMMIT');
          } catch (error) {
            await connection.query('ROLLBACK');
            throw error;
          }
        }
      }),
    );
    return count / ((performance.now() - started) / 1000);
  } finally {
    for (const connection of connections) connection.release();
  }
}

/** Runs `work` in a transaction on one connection, then rolls it back (a DELETE deletes nothing). */
export async function rolledBack<Tx, T>(
  db: BenchDatabase<Tx>,
  work: (connection: BenchConnection<Tx>) => Promise<T>,
): Promise<T> {
  const connection = await db.connect();
  try {
    await connection.query('BEGIN');
    return await work(connection);
  } finally {
    await connection.query('ROLLBACK').catch(() => undefined);
    connection.release();
  }
}

/** The median of `iterations` server times, each `measure`d in a transaction rolled back after it. */
export async function serverTimeOf<Tx>(
  db: BenchDatabase<Tx>,
  iterations: number,
  measure: (connection: BenchConnection<Tx>) => Promise<number>,
): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < iterations; i += 1) times.push(await rolledBack(db, measure));
  return median(times);
}

/** Times `run` on one connection, `warmup + iterations` times; the timed ones' p50 and p95. */
export async function timeOnConnection<Tx>(
  db: BenchDatabase<Tx>,
  iterations: number,
  warmup: number,
  run: (connection: BenchConnection<Tx>) => Promise<unknown>,
): Promise<StatementTiming> {
  const connection = await db.connect();
  try {
    const times: number[] = [];
    for (let i = 0; i < warmup + iterations; i += 1) {
      const started = performance.now();
      await run(connection);
      if (i >= warmup) times.push(performance.now() - started);
    }
    return { p50: median(times), p95: quantile(times, 0.95), iterations };
  } finally {
    connection.release();
  }
}

/**
 * The benchmark database named by `url`, checked (it is written into DDL), and the URL of the
 * same server at `adminPath` (the database the admin connection opens).
 */
export function databaseOf(url: string, adminPath: string): { name: string; admin: string } {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`Unexpected benchmark database name ${name}`);
  const admin = new URL(url);
  admin.pathname = adminPath;
  return { name, admin: admin.toString() };
}

/** A message table as the dialects name it (the connection's own schema or database). */
export const table = (name: string) => ({ schema: undefined, name });
