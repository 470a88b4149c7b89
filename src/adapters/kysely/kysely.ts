import type { DatabaseAdapter, Dialect, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { invalidOption } from '../../core/options.js';
import { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';
import { sqliteDialect } from '../../dialects/sqlite/sqlite-dialect.js';
import { withArrayLiterals } from '../shared/postgres-values.js';
import { resolveRelaySide, type DataLayerOptions, type EngineSide } from '../shared/engine-side.js';
import { explainingFailedTransaction } from '../shared/failed-transaction.js';

/** Something that runs a compiled query: a `Kysely`, a `Transaction` or a single connection. */
interface KyselyExecutorLike {
  /** Takes Kysely's `CompiledQuery`; outboxer builds one like `CompiledQuery.raw(sql, parameters)`. */
  executeQuery(query: never): Promise<{ readonly rows: readonly unknown[] }>;
}

/**
 * A Kysely `Transaction` (from `db.transaction().execute(async (trx) => …)` or
 * `db.startTransaction().execute()`). Its `isTransaction` is `true`; a `Kysely`'s is `boolean`, so
 * passing the database where a transaction is required is a type error.
 */
export interface KyselyTransaction {
  readonly isTransaction: true;
  withoutPlugins(): KyselyExecutorLike;
}

interface KyselyRootLike extends KyselyExecutorLike {
  transaction(): { execute<T>(fn: (trx: KyselyExecutorLike) => Promise<T>): Promise<T> };
  connection(): { execute<T>(fn: (db: KyselyExecutorLike) => Promise<T>): Promise<T> };
}

/** The part of a `Kysely` instance outboxer uses. */
export interface KyselyDatabase {
  readonly isTransaction: boolean;
  withoutPlugins(): KyselyRootLike;
}

/** Options of {@link kysely}. */
export interface KyselyOptions extends DataLayerOptions {
  /**
   * The database behind the Kysely dialect. Default: `'sqlite'` when the Kysely instance uses a
   * SQLite dialect adapter (`SqliteDialect`), `'postgres'` otherwise.
   */
  dialect?: 'postgres' | 'sqlite';
}

/**
 * The Kysely adapter, for Postgres (`PostgresDialect`) and SQLite (`SqliteDialect` on
 * better-sqlite3). Publish with the `trx` of `db.transaction().execute(async (trx) => …)`.
 * Queries run without the instance's plugins, so a `CamelCasePlugin` does not rename outboxer's
 * columns.
 *
 * The relay side runs on the same Kysely instance. On SQLite, Kysely's one connection is shared
 * behind a lock: a relay's statements wait while one of your transactions is open and never run
 * inside it; settlements take the write lock up front (`BEGIN IMMEDIATE`). On SQLite `publish`
 * returns a promise, as every Kysely query does. Postgres relays find new messages by polling
 * unless `notifications` is given (Kysely has no LISTEN): `kysely(db, { notifications: nodePostgres(pool) })`.
 *
 * @example
 * import { Kysely, PostgresDialect } from 'kysely';
 * import { kysely } from 'outboxer/kysely';
 * const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
 * const outboxer = new Outboxer({ database: kysely(db), outboxes: { orders: { relay } } });
 * await db.transaction().execute(async (trx) => {
 *   await trx.insertInto('orders').values(order).execute();
 *   await outboxer.publish(trx, 'orders', order, { groupKey: `order:${order.id}` });
 * });
 */
export function kysely(
  db: KyselyDatabase,
  options?: KyselyOptions,
): DatabaseAdapter<KyselyTransaction, false> {
  if (typeof db !== 'object' || db === null || typeof db.withoutPlugins !== 'function') {
    throw invalidOption('kysely', 'a Kysely instance', db);
  }
  const dialect = chooseDialect(db, options?.dialect);
  const root = db.withoutPlugins();
  const run = async (executor: KyselyExecutorLike, query: SqlQuery): Promise<Row[]> => {
    const values = dialect === postgresDialect ? withArrayLiterals(query.values) : [...query.values];
    const result = await executor.executeQuery(compiled(query.text, values) as never);
    return result.rows as Row[];
  };
  const own: EngineSide = {
    execute: (query) => run(root, query),
    executeAtomically:
      dialect === postgresDialect
        ? (queries) =>
            root.transaction().execute(async (trx) => {
              const results: Row[][] = [];
              for (const query of queries) results.push(await run(trx, query));
              return results;
            })
        : (queries) =>
            // BEGIN IMMEDIATE on Kysely's one SQLite connection: the write lock first, not SQLITE_BUSY half-way.
            root.connection().execute(async (connection) => {
              await run(connection, { text: 'BEGIN IMMEDIATE', values: [] });
              try {
                const results: Row[][] = [];
                for (const query of queries) results.push(await run(connection, query));
                await run(connection, { text: 'COMMIT', values: [] });
                return results;
              } catch (error) {
                await run(connection, { text: 'ROLLBACK', values: [] }).catch(() => undefined);
                throw error;
              }
            }),
  };
  return {
    dialect,
    sync: false,
    executeInTransaction(tx, query) {
      if (typeof tx !== 'object' || tx === null || typeof tx.withoutPlugins !== 'function') {
        throw new OutboxerError(
          'NOT_IN_TRANSACTION',
          'publish() needs the Kysely transaction: await db.transaction().execute(async (trx) => { await outboxer.publish(trx, ...) }).',
        );
      }
      if ((tx as { isTransaction: unknown }).isTransaction !== true) {
        throw new OutboxerError(
          'NOT_IN_TRANSACTION',
          'publish() was given a Kysely instance, not a transaction. Publish with the trx of db.transaction().execute(async (trx) => ...), so the message commits with your change.',
        );
      }
      return explainingFailedTransaction(run(tx.withoutPlugins(), query));
    },
    ...resolveRelaySide('kysely', dialect, own, options, ['dialect']),
  };
}

/** What `CompiledQuery.raw(sql, parameters)` builds. */
function compiled(sql: string, parameters: readonly unknown[]) {
  return {
    sql,
    parameters,
    query: { kind: 'RawNode', sqlFragments: [sql], parameters: [] },
    queryId: { queryId: `outboxer-${(counter = (counter + 1) % Number.MAX_SAFE_INTEGER)}` },
  };
}
let counter = 0;

function chooseDialect(db: KyselyDatabase, name: KyselyOptions['dialect']): Dialect {
  if (name === 'postgres') return postgresDialect;
  if (name === 'sqlite') return sqliteDialect;
  if (name !== undefined) throw invalidOption('kysely.dialect', '"postgres" or "sqlite"', name);
  // Kysely does not say which database it talks to; its dialect adapter's class does.
  const executor = (db as { getExecutor?: () => { adapter?: object } }).getExecutor?.();
  const adapterName = executor?.adapter?.constructor.name ?? '';
  return /sqlite/i.test(adapterName) ? sqliteDialect : postgresDialect;
}
