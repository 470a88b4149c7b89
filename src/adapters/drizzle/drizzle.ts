import type { DatabaseAdapter, Row } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { invalidOption } from '../../core/options.js';
import { mysqlDialect } from '../../dialects/mysql/mysql-dialect.js';
import { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';
import { sqliteDialect } from '../../dialects/sqlite/sqlite-dialect.js';
import { betterSqlite3, type BetterSqlite3DatabaseLike } from '../better-sqlite3/better-sqlite3.js';
import { mysql2, type Mysql2PoolLike } from '../mysql2/mysql2.js';
import { nodePostgres, type PgPoolLike } from '../pg/node-postgres.js';
import { postgresJs, type PostgresJsSql } from '../postgres-js/postgres-js.js';
import { mysqlRowsInTransaction } from '../shared/mysql-results.js';
import { withArrayLiterals } from '../shared/postgres-values.js';
import { resolveRelaySide, type DataLayerOptions, type EngineSide } from '../shared/engine-side.js';
import { explainingFailedTransaction } from '../shared/failed-transaction.js';

/**
 * A Drizzle transaction on Postgres: the `tx` of `db.transaction(async (tx) => …)` (a
 * `PgTransaction`). The database itself has no `rollback()`, so passing it is a type error.
 */
export interface DrizzlePgTransaction {
  /** Takes Drizzle's `SQLWrapper`. */
  execute(query: never): PromiseLike<unknown>;
  rollback(): never;
}

/**
 * A synchronous Drizzle transaction on SQLite (better-sqlite3): the `tx` of
 * `db.transaction((tx) => …)`. Async SQLite drivers (libsql, D1) return promises from `all()`
 * and are not accepted.
 */
export interface DrizzleSqliteTransaction {
  /** Takes Drizzle's `SQLWrapper`; returns the rows synchronously. */
  all(query: never): unknown[];
  /** For a statement that returns no rows (`all` refuses those). */
  run(query: never): unknown;
  rollback(): never;
}

/**
 * A Drizzle transaction on MySQL or MariaDB (`drizzle-orm/mysql2`): the `tx` of
 * `db.transaction(async (tx) => …)` (a `MySqlTransaction`).
 */
export interface DrizzleMysqlTransaction {
  /** Takes Drizzle's `SQLWrapper`; resolves with mysql2's `[rows or result header, fields]`. */
  execute(query: never): PromiseLike<unknown>;
  rollback(): never;
}

/** The part of a Drizzle mysql2 database outboxer uses. */
export interface DrizzleMysqlDatabase {
  execute(query: never): PromiseLike<unknown>;
  /** The mysql2 pool (or connection) Drizzle wraps, from `mysql2` or `mysql2/promise`. */
  readonly $client:
    { getConnection(...args: never[]): unknown } | { beginTransaction(...args: never[]): unknown };
}

/** The part of a Drizzle Postgres database (node-postgres or postgres.js driver) outboxer uses. */
export interface DrizzlePgDatabase {
  execute(query: never): PromiseLike<unknown>;
  /** The driver client: a `pg.Pool` or a postgres.js `sql`. */
  readonly $client: unknown;
}

/** The part of a Drizzle better-sqlite3 database outboxer uses. */
export interface DrizzleSqliteDatabase {
  all(query: never): unknown[];
  readonly $client: BetterSqlite3DatabaseLike;
}

/**
 * The Drizzle adapter: `drizzle-orm/node-postgres`, `drizzle-orm/postgres-js`, `drizzle-orm/mysql2`
 * (MySQL 8, MariaDB) or `drizzle-orm/better-sqlite3`. Statements go through Drizzle's own
 * `execute`/`all` with outboxer's SQL text and parameters as they are (what `sql.param()` would
 * bind). The database is read from the Drizzle database's class; another one (SingleStore, Gel, a
 * PlanetScale or libsql driver) is refused with `DATABASE_UNSUPPORTED`.
 *
 * On better-sqlite3, Drizzle's transactions are synchronous and so is `publish`: it returns the id,
 * not a promise. The relay side runs on the driver client Drizzle wraps (`db.$client`) through the
 * `outboxer/pg`, `outboxer/postgres-js`, `outboxer/mysql2` or `outboxer/better-sqlite3` adapter:
 * Drizzle's node-postgres session returns timestamps as strings, the pg driver as dates.
 * `notify: true` listens on a dedicated connection of that client (not on MySQL, which has no
 * LISTEN). A drizzle over a single connection (a `pg.Client`, a mysql2 `Connection`) can publish
 * but needs `relayDatabase` to relay.
 *
 * @example
 * import { drizzle as drizzleOrm } from 'drizzle-orm/node-postgres';
 * import { drizzle } from 'outboxer/drizzle';
 * const db = drizzleOrm(pool);
 * const outboxer = new Outboxer({ database: drizzle(db), outboxes: { orders: { relay } } });
 * await db.transaction(async (tx) => {
 *   await tx.insert(orders).values(order);
 *   await outboxer.publish(tx, 'orders', order, { groupKey: `order:${order.id}` });
 * });
 */
export function drizzle(
  db: DrizzleSqliteDatabase,
  options?: DataLayerOptions,
): DatabaseAdapter<DrizzleSqliteTransaction, true>;
export function drizzle(
  db: DrizzleMysqlDatabase,
  options?: DataLayerOptions,
): DatabaseAdapter<DrizzleMysqlTransaction, false>;
export function drizzle(
  db: DrizzlePgDatabase,
  options?: DataLayerOptions,
): DatabaseAdapter<DrizzlePgTransaction, false>;
export function drizzle(
  db: DrizzleSqliteDatabase | DrizzleMysqlDatabase | DrizzlePgDatabase,
  options?: DataLayerOptions,
):
  | DatabaseAdapter<DrizzleSqliteTransaction, true>
  | DatabaseAdapter<DrizzleMysqlTransaction, false>
  | DatabaseAdapter<DrizzlePgTransaction, false> {
  const accepted =
    'a Drizzle database (from drizzle-orm/node-postgres, postgres-js, mysql2 or better-sqlite3)';
  if (typeof db !== 'object' || db === null || !('$client' in db))
    throw invalidOption('drizzle', accepted, db);
  const kinds = entityKinds(db);
  if (kinds.includes('MySqlDatabase')) {
    if (!kinds.includes('MySql2Database')) throw unsupported(`MySQL through ${kinds[0]}`);
    return drizzleMysql(db as DrizzleMysqlDatabase, options);
  }
  const executes = 'execute' in db && typeof db.execute === 'function';
  const all = 'all' in db && typeof db.all === 'function';
  // A database of another family (SingleStore, Gel): its class says so.
  if (kinds.length > 0 && !kinds.includes('PgDatabase') && !kinds.includes('BaseSQLiteDatabase'))
    throw unsupported(kinds[0]!);
  if (executes) return drizzlePostgres(db as DrizzlePgDatabase, options);
  if (all) return drizzleSqlite(db as DrizzleSqliteDatabase, options);
  throw invalidOption('drizzle', accepted, db);
}

/** Drizzle's own class names of `db`, most derived first (`MySql2Database`, `MySqlDatabase`). */
function entityKinds(db: object): string[] {
  const kinds: string[] = [];
  for (let c: unknown = db.constructor; typeof c === 'function'; c = Object.getPrototypeOf(c)) {
    const kind = (c as unknown as Record<symbol, unknown>)[Symbol.for('drizzle:entityKind')];
    if (typeof kind === 'string' && !kinds.includes(kind)) kinds.push(kind);
  }
  return kinds;
}

function unsupported(what: string): OutboxerError {
  return new OutboxerError(
    'DATABASE_UNSUPPORTED',
    `drizzle(db): outboxer supports Drizzle on PostgreSQL (node-postgres, postgres.js), on MySQL and MariaDB (mysql2) and on SQLite (better-sqlite3); this database is ${what}.`,
  );
}

function drizzlePostgres(
  db: DrizzlePgDatabase,
  options: DataLayerOptions | undefined,
): DatabaseAdapter<DrizzlePgTransaction, false> {
  return {
    dialect: postgresDialect,
    sync: false,
    async executeInTransaction(tx, query) {
      assertTransaction(
        tx,
        'execute',
        'await db.transaction(async (tx) => { await outboxer.publish(tx, ...) })',
      );
      const result = await explainingFailedTransaction(
        tx.execute(wrap(query.text, withArrayLiterals(query.values)) as never),
      );
      // node-postgres returns a QueryResult, postgres.js the rows.
      return (Array.isArray(result) ? result : (result as { rows: Row[] }).rows) as Row[];
    },
    ...resolveRelaySide('drizzle', postgresDialect, postgresClientSide(db.$client), options),
  };
}

/**
 * On MySQL, each statement of a publish resolves with mysql2's `[rows or result header, fields]`:
 * the header's server status refuses a `tx` whose transaction the server ended (a deadlock).
 */
function drizzleMysql(
  db: DrizzleMysqlDatabase,
  options: DataLayerOptions | undefined,
): DatabaseAdapter<DrizzleMysqlTransaction, false> {
  const usage = 'await db.transaction(async (tx) => { await outboxer.publish(tx, ...) })';
  return {
    dialect: mysqlDialect,
    sync: false,
    async executeInTransaction(tx, query) {
      assertTransaction(tx, 'execute', usage);
      const response = (await tx.execute(wrap(query.text, query.values) as never)) as [unknown, unknown];
      return mysqlRowsInTransaction(response[0], `Publish with the tx of ${usage}`);
    },
    ...resolveRelaySide('drizzle', mysqlDialect, mysqlClientSide(db.$client), options),
  };
}

function drizzleSqlite(
  db: DrizzleSqliteDatabase,
  options: DataLayerOptions | undefined,
): DatabaseAdapter<DrizzleSqliteTransaction, true> {
  const client = db.$client;
  if (
    typeof client !== 'object' ||
    client === null ||
    typeof client.prepare !== 'function' ||
    !('inTransaction' in client)
  ) {
    throw invalidOption(
      'drizzle',
      'a Drizzle database on better-sqlite3 (db.$client a better-sqlite3 Database)',
      client,
    );
  }
  return {
    dialect: sqliteDialect,
    sync: true,
    executeInTransaction(tx, query) {
      assertTransaction(tx, 'all', 'db.transaction((tx) => { outboxer.publish(tx, ...) })');
      if (!client.inTransaction) {
        throw new OutboxerError(
          'NOT_IN_TRANSACTION',
          'publish() was given a Drizzle transaction that has ended. Publish inside the db.transaction((tx) => ...) callback, synchronously.',
        );
      }
      if (query.rowless === true) {
        tx.run(wrap(query.text, query.values) as never); // all() refuses what returns no rows
        return [];
      }
      return tx.all(wrap(query.text, query.values) as never) as Row[];
    },
    // Drizzle's SQLite transactions are synchronous: nothing else can run while one is open.
    ...resolveRelaySide('drizzle', sqliteDialect, betterSqlite3(client), options),
  };
}

/**
 * A Drizzle `SQLWrapper` for SQL text that already has its placeholders: Drizzle asks `getSQL()`
 * for the query and compiles it with `toQuery()`, which here returns the text and parameters as
 * they are (each parameter bound once, arrays included, as `sql.param()` would).
 */
function wrap(text: string, params: readonly unknown[]) {
  const query = { sql: text, params: [...params] };
  const sql = { toQuery: () => query, getSQL: () => sql };
  return sql;
}

function assertTransaction(tx: unknown, method: 'execute' | 'all', usage: string): void {
  if (
    typeof tx !== 'object' ||
    tx === null ||
    typeof (tx as Record<string, unknown>)[method] !== 'function'
  ) {
    throw new OutboxerError('NOT_IN_TRANSACTION', `publish() needs the Drizzle transaction: ${usage}.`);
  }
  if (typeof (tx as { rollback?: unknown }).rollback !== 'function') {
    throw new OutboxerError(
      'NOT_IN_TRANSACTION',
      `publish() was given the Drizzle database, not a transaction. Publish with the tx of ${usage}, so the message commits with your change.`,
    );
  }
}

/** The relay side on the client Drizzle wraps: a pg Pool or a postgres.js sql. */
function postgresClientSide(client: unknown): EngineSide {
  if (typeof client === 'function' && typeof (client as { unsafe?: unknown }).unsafe === 'function') {
    return postgresJs(client as unknown as PostgresJsSql);
  }
  if (
    typeof client === 'object' &&
    client !== null &&
    'totalCount' in client &&
    typeof (client as { connect?: unknown }).connect === 'function'
  ) {
    return nodePostgres(client as unknown as PgPoolLike);
  }
  return needsRelayDatabase('a pg.Client', 'a pg.Pool', 'nodePostgres(pool)');
}

/**
 * The relay side on the mysql2 client Drizzle wraps, through `outboxer/mysql2`: a pool from
 * `mysql2/promise`, or one from `mysql2` through its `promise()` wrapper.
 */
function mysqlClientSide(client: DrizzleMysqlDatabase['$client']): EngineSide {
  const { promise } = client as { promise?: () => unknown };
  const promised = (typeof promise === 'function' ? promise.call(client) : client) as object;
  if (typeof (promised as { getConnection?: unknown }).getConnection === 'function')
    return mysql2(promised as Mysql2PoolLike);
  // A single connection also runs the transactions you publish in: relays would run inside them.
  return needsRelayDatabase('a mysql2 Connection', 'a mysql2 pool', 'mysql2(pool)');
}

/** A relay side that refuses to run: the Drizzle database wraps a single connection. */
function needsRelayDatabase(connection: string, pool: string, adapter: string): EngineSide {
  const refuse = async (): Promise<never> => {
    throw new OutboxerError(
      'DATABASE_UNSUPPORTED',
      `drizzle(db): relays need a pool, and this Drizzle database wraps a single connection (${connection}). Create it with ${pool}, or pass relayDatabase: ${adapter}.`,
    );
  };
  return { execute: refuse, executeAtomically: refuse };
}
