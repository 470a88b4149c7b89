import type { DatabaseAdapter, Dialect, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { invalidOption } from '../../core/options.js';
import { mysqlDialect } from '../../dialects/mysql/mysql-dialect.js';
import { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';
import { sqliteDialect } from '../../dialects/sqlite/sqlite-dialect.js';
import { checkTransactionWithSavepoint, ENGINE_ISOLATION_LEVEL } from '../shared/mysql-results.js';
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

interface KyselyTransactionBuilderLike {
  execute<T>(fn: (trx: KyselyExecutorLike) => Promise<T>): Promise<T>;
  setIsolationLevel(level: typeof ENGINE_ISOLATION_LEVEL): KyselyTransactionBuilderLike;
}

interface KyselyRootLike extends KyselyExecutorLike {
  transaction(): KyselyTransactionBuilderLike;
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
   * The database behind the Kysely dialect. Default: read from the class of the instance's dialect
   * adapter: `'postgres'` for a `PostgresAdapter` (`PostgresDialect`, `PGliteDialect`), `'mysql'`
   * for a `MysqlAdapter` (`MysqlDialect`, MySQL 8 or MariaDB), `'sqlite'` for a `SqliteAdapter`;
   * any other (`MssqlDialect`) is refused with `DATABASE_UNSUPPORTED`. Pass it when a bundler
   * renamed those classes, or for a third-party dialect whose adapter does not extend them.
   */
  dialect?: 'postgres' | 'sqlite' | 'mysql';
}

/**
 * The Kysely adapter, for Postgres (`PostgresDialect`), MySQL 8 and MariaDB (`MysqlDialect` over a
 * mysql2 pool) and SQLite (`SqliteDialect` on better-sqlite3). Publish with the `trx` of
 * `db.transaction().execute(async (trx) => …)`.
 * Queries run without the instance's plugins, so a `CamelCasePlugin` does not rename outboxer's
 * columns.
 *
 * The relay side runs on the same Kysely instance. On SQLite, Kysely's one connection is shared
 * behind a lock: a relay's statements wait while one of your transactions is open and never run
 * inside it; settlements take the write lock up front (`BEGIN IMMEDIATE`). On SQLite `publish`
 * returns a promise, as every Kysely query does. Postgres relays find new messages by polling
 * unless `notifications` is given (Kysely has no LISTEN): `kysely(db, { notifications: nodePostgres(pool) })`.
 * On MySQL, relays poll (MySQL has no LISTEN), the relay's transactions run at READ COMMITTED, and
 * each publish (and each inbox handle) first checks with a savepoint that `trx` is still inside a
 * transaction on the server (Kysely does not pass on the server's status): one InnoDB rolled back
 * after a deadlock is refused.
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
  const run = (executor: KyselyExecutorLike, query: SqlQuery) => runOn(executor, query, dialect);
  const own: EngineSide = {
    execute: (query) => run(root, query),
    executeAtomically: (queries) =>
      inOneTransaction(root, dialect, async (executor) => {
        const results: Row[][] = [];
        for (const query of queries) results.push(await run(executor, query));
        return results;
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
      const executor = tx.withoutPlugins();
      if (dialect === mysqlDialect && query.checksTransaction === true)
        return checkedOnMysql(executor, query);
      return explainingFailedTransaction(run(executor, query));
    },
    ...resolveRelaySide('kysely', dialect, own, options, ['dialect']),
  };
}

/**
 * A statement where work begins in the caller's transaction on MySQL, after the savepoint probe:
 * Kysely turns the reply's result header into counts, so its server status cannot be read.
 */
async function checkedOnMysql(executor: KyselyExecutorLike, query: SqlQuery): Promise<Row[]> {
  await checkTransactionWithSavepoint(
    (probe) => runOn(executor, probe, mysqlDialect),
    'Publish with the trx of db.transaction().execute(async (trx) => ...)',
  );
  return runOn(executor, query, mysqlDialect);
}

async function runOn(executor: KyselyExecutorLike, query: SqlQuery, dialect: Dialect): Promise<Row[]> {
  const values = dialect === postgresDialect ? withArrayLiterals(query.values) : [...query.values];
  const result = await executor.executeQuery(compiled(query.text, values) as never);
  return result.rows as Row[];
}

/** One transaction of the relay side, as each database wants it. */
function inOneTransaction<T>(
  root: KyselyRootLike,
  dialect: Dialect,
  work: (executor: KyselyExecutorLike) => Promise<T>,
): Promise<T> {
  if (dialect === postgresDialect) return root.transaction().execute(work);
  if (dialect === mysqlDialect)
    return root.transaction().setIsolationLevel(ENGINE_ISOLATION_LEVEL).execute(work);
  // BEGIN IMMEDIATE on Kysely's one SQLite connection: the write lock first, not SQLITE_BUSY half-way.
  return root.connection().execute(async (connection) => {
    const command = (text: string) => runOn(connection, { text, values: [] }, dialect);
    await command('BEGIN IMMEDIATE');
    try {
      const result = await work(connection);
      await command('COMMIT');
      return result;
    } catch (error) {
      await command('ROLLBACK').catch(() => undefined);
      throw error;
    }
  });
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

const DIALECTS = { postgres: postgresDialect, sqlite: sqliteDialect, mysql: mysqlDialect } as const;

/** The database each of Kysely's own dialect adapters (and those that extend them) talks to. */
const ADAPTER_CLASSES: ReadonlyArray<[RegExp, Dialect]> = [
  [/postgres|pglite/i, postgresDialect],
  [/mysql/i, mysqlDialect],
  [/sqlite/i, sqliteDialect],
];

function chooseDialect(db: KyselyDatabase, name: KyselyOptions['dialect']): Dialect {
  if (name !== undefined) {
    if (!Object.hasOwn(DIALECTS, name))
      throw invalidOption('kysely.dialect', '"postgres", "mysql" or "sqlite"', name);
    return DIALECTS[name];
  }
  // Kysely does not say which database it talks to; its dialect adapter's class does.
  const executor = (db as { getExecutor?: () => { adapter?: object } }).getExecutor?.();
  const adapter = executor?.adapter;
  if (adapter === undefined) return postgresDialect;
  const classes: string[] = [];
  for (let proto: unknown = Object.getPrototypeOf(adapter); proto !== null && proto !== Object.prototype;) {
    const className = (proto as { constructor?: { name?: string } }).constructor?.name ?? '';
    const found = ADAPTER_CLASSES.find(([pattern]) => pattern.test(className));
    if (found !== undefined) return found[1];
    classes.push(className);
    proto = Object.getPrototypeOf(proto);
  }
  throw new OutboxerError(
    'DATABASE_UNSUPPORTED',
    `kysely(db): the Kysely instance's dialect adapter is ${classes[0] || 'of an unnamed class'}; outboxer supports Kysely on PostgreSQL, MySQL/MariaDB and SQLite. If the database is one of those, pass kysely(db, { dialect: 'postgres' | 'mysql' | 'sqlite' }).`,
  );
}
