/**
 * The seam between the core and a client library (an adapter): run SQL inside the user's
 * transaction, on the library's own connection, and in one transaction. The SQL itself comes from
 * the dialect (dialect.ts).
 */
import type { Dialect } from './dialect.js';
import { isBatch, type Batch, type Row, type SqlQuery, type Statements } from './sql.js';

export type { Batch, Row, SqlQuery, Statement, Statements } from './sql.js';
export type * from './dialect.js';
export { Status } from './sql.js';

/** A value that is synchronous for synchronous drivers (better-sqlite3) and a promise otherwise. */
export type MaybePromise<T, Sync extends boolean> = Sync extends true ? T : Promise<T>;

/**
 * The seam between the core and a client library: run SQL inside the user's transaction, and run
 * SQL on the library's own connection for the relay and the admin API. Everything else (which SQL,
 * which order) is the core's and the dialect's business.
 */
export interface DatabaseAdapter<Tx = unknown, Sync extends boolean = boolean> {
  readonly dialect: Dialect;
  /** True when {@link executeInTransaction} returns rows synchronously. */
  readonly sync: Sync;
  /**
   * Runs one statement inside the transaction the user passed to `publish`. Throws a
   * `NOT_IN_TRANSACTION` error when `tx` can be seen not to be inside a transaction.
   */
  executeInTransaction(tx: Tx, query: SqlQuery): MaybePromise<Row[], Sync>;
  /** Runs one statement on its own (autocommit) on the adapter's pool or connection. */
  execute(query: SqlQuery): Promise<Row[]>;
  /** Runs statements in one transaction, in order; all or nothing. Returns each statement's rows. */
  executeAtomically(queries: readonly SqlQuery[]): Promise<Row[][]>;
  /**
   * Postgres only: a dedicated connection that LISTENs on `channel`, outside the pool, that
   * reconnects with backoff. Absent where the database has no notifications.
   */
  listen?(channel: string, handlers: ListenHandlers): Promise<Listener>;
}

export interface ListenHandlers {
  onNotification(payload: string): void;
  /** Connected (true) or lost (false); while lost, workers poll. */
  onStatus(connected: boolean, error?: unknown): void;
}

export interface Listener {
  close(): Promise<void>;
}

/**
 * Runs a statement on its own and reads its rows; a {@link Batch} (a dialect that needs several
 * statements for the work, MySQL) runs in one transaction.
 */
export async function run<R>(
  adapter: Pick<DatabaseAdapter, 'execute' | 'executeAtomically'>,
  work: Statements<R>,
): Promise<R> {
  if (isBatch(work)) return work.read(await adapter.executeAtomically(work));
  return work.read(await adapter.execute(work));
}

/** Runs a batch in one transaction and reads its rows. */
export async function runAtomically<R>(
  adapter: Pick<DatabaseAdapter, 'executeAtomically'>,
  statements: Batch<R>,
): Promise<R> {
  return statements.read(await adapter.executeAtomically(statements));
}
