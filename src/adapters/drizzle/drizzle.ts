import type { DatabaseAdapter, Row } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { invalidOption } from '../../core/options.js';
import { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';
import { sqliteDialect } from '../../dialects/sqlite/sqlite-dialect.js';
import { betterSqlite3, type BetterSqlite3DatabaseLike } from '../better-sqlite3/better-sqlite3.js';
import { nodePostgres, type PgPoolLike } from '../pg/node-postgres.js';
import { postgresJs, type PostgresJsSql } from '../postgres-js/postgres-js.js';
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
 * The Drizzle adapter: `drizzle-orm/node-postgres`, `drizzle-orm/postgres-js` or
 * `drizzle-orm/better-sqlite3`. Statements go through Drizzle's own `execute`/`all` with
 * outboxer's SQL text and parameters as they are (what `sql.param()` would bind).
 *
 * On better-sqlite3, Drizzle's transactions are synchronous and so is `publish`: it returns the id,
 * not a promise. The relay side runs on the driver client Drizzle wraps (`db.$client`) through the
 * `outboxer/pg`, `outboxer/postgres-js` or `outboxer/better-sqlite3` adapter: Drizzle's
 * node-postgres session returns timestamps as strings, the pg driver as dates. `notify: true`
 * listens on a dedicated connection of that client. A drizzle over a single `pg.Client` (not a
 * pool) can publish but needs `relayDatabase` to relay.
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
  db: DrizzlePgDatabase,
  options?: DataLayerOptions,
): DatabaseAdapter<DrizzlePgTransaction, false>;
export function drizzle(
  db: DrizzleSqliteDatabase | DrizzlePgDatabase,
  options?: DataLayerOptions,
): DatabaseAdapter<DrizzleSqliteTransaction, true> | DatabaseAdapter<DrizzlePgTransaction, false> {
  if (typeof db !== 'object' || db === null || !('$client' in db)) {
    throw invalidOption(
      'drizzle',
      'a Drizzle database (from drizzle-orm/node-postgres, postgres-js or better-sqlite3)',
      db,
    );
  }
  if ('execute' in db && typeof db.execute === 'function') return drizzlePostgres(db, options);
  if ('all' in db && typeof db.all === 'function') return drizzleSqlite(db, options);
  throw invalidOption(
    'drizzle',
    'a Drizzle database (from drizzle-orm/node-postgres, postgres-js or better-sqlite3)',
    db,
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
  const refuse = async (): Promise<never> => {
    throw new OutboxerError(
      'DATABASE_UNSUPPORTED',
      'drizzle(db): relays need a pool, and this Drizzle database wraps a single connection (a pg.Client). Create it with a pg.Pool, or pass relayDatabase: nodePostgres(pool).',
    );
  };
  return { execute: refuse, executeAtomically: refuse };
}
