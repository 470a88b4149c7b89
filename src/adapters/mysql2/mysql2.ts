import type { DatabaseAdapter, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { mysqlDialect } from '../../dialects/mysql/mysql-dialect.js';
import { ENGINE_ISOLATION_LEVEL, mysqlRows, mysqlRowsInTransaction } from '../shared/mysql-results.js';

/** What mysql2's promise API resolves a query with: rows (a SELECT) or a result header, and fields. */
type QueryResult = [unknown, unknown];

/**
 * The part of a mysql2 promise `Connection` or `PoolConnection` outboxer uses to publish: the
 * connection your transaction runs on (`await conn.beginTransaction()` first).
 */
export interface Mysql2TransactionConnection {
  query(sql: string, values?: unknown[]): Promise<QueryResult>;
  /**
   * A pool is not a transaction: this makes passing one a type error, whose message (this type)
   * says what to pass instead.
   */
  readonly getConnection?: 'mysql2 Pool is not a transaction: publish with the connection of your transaction (conn = await pool.getConnection(); await conn.beginTransaction())';
}

/** The part of a mysql2 promise `PoolConnection` the relay side uses. */
interface Mysql2PoolConnectionLike {
  query(sql: string, values?: unknown[]): Promise<QueryResult>;
  beginTransaction(): Promise<unknown>;
  commit(): Promise<unknown>;
  rollback(): Promise<unknown>;
  release(): void;
  destroy?(): void;
}

/** The part of a mysql2 promise `Pool` (`mysql.createPool(…)` from `mysql2/promise`) outboxer uses. */
export interface Mysql2PoolLike {
  query(sql: string, values?: unknown[]): Promise<QueryResult>;
  getConnection(): Promise<Mysql2PoolConnectionLike>;
}

/** The part of a single mysql2 promise `Connection` outboxer uses. */
export interface Mysql2ConnectionLike {
  query(sql: string, values?: unknown[]): Promise<QueryResult>;
  beginTransaction(): Promise<unknown>;
  commit(): Promise<unknown>;
  rollback(): Promise<unknown>;
}

/**
 * The mysql2 adapter (promise API), for MySQL 8 and MariaDB 10.6+. Publish with the connection of
 * your transaction; relays and the admin API use the pool, one pooled connection per statement or
 * transaction. Given a single `Connection` instead, they run on it, one at a time, between your
 * transactions: use a pool for a relaying instance.
 *
 * Statements are sent with `query()`: mysql2 binds each `?` value on the client, escaped, so no
 * prepared statement is kept per connection (and none is lost to a pooler such as ProxySQL). Its
 * escaping uses backslashes: not for a server whose `sql_mode` includes `NO_BACKSLASH_ESCAPES`.
 *
 * @example
 * import mysql from 'mysql2/promise';
 * import { mysql2 } from 'outboxer/mysql2';
 * const pool = mysql.createPool({ uri: process.env.DATABASE_URL });
 * const outboxer = new Outboxer({ database: mysql2(pool), outboxes: { ... } });
 * const conn = await pool.getConnection();
 * await conn.beginTransaction();
 * await conn.query('INSERT INTO orders …', [...]);
 * await outboxer.publish(conn, 'orders', order, { groupKey: `order:${order.id}` });
 * await conn.commit();
 * conn.release();
 */
export function mysql2(
  database: Mysql2PoolLike | Mysql2ConnectionLike,
): DatabaseAdapter<Mysql2TransactionConnection, false> {
  const engine = 'getConnection' in database ? pooled(database) : onOneConnection(database);
  return {
    dialect: mysqlDialect,
    sync: false,
    async executeInTransaction(tx, query) {
      assertConnection(tx);
      const [result] = await tx.query(query.text, [...query.values]);
      return mysqlRowsInTransaction(result, 'Call await conn.beginTransaction() first');
    },
    execute: engine.execute,
    executeAtomically: engine.executeAtomically,
  };
}

function assertConnection(tx: Mysql2TransactionConnection): void {
  if (typeof tx !== 'object' || tx === null || typeof tx.query !== 'function') {
    throw new OutboxerError(
      'NOT_IN_TRANSACTION',
      'publish() needs the mysql2 connection of your open transaction as its first argument.',
    );
  }
  if (typeof (tx as { getConnection?: unknown }).getConnection === 'function') {
    throw new OutboxerError(
      'NOT_IN_TRANSACTION',
      'publish() was given a mysql2 Pool. Pass the connection of your transaction: const conn = await pool.getConnection(); await conn.beginTransaction(); ...',
    );
  }
}

type EngineSide = Pick<DatabaseAdapter, 'execute' | 'executeAtomically'>;

function pooled(pool: Mysql2PoolLike): EngineSide {
  return {
    execute: async (query) => mysqlRows((await pool.query(query.text, [...query.values]))[0]),
    executeAtomically: async (queries) => {
      const connection = await pool.getConnection();
      let broken = false;
      try {
        return await inTransaction(connection, queries);
      } catch (error) {
        broken = isConnectionError(error);
        throw error;
      } finally {
        // A connection that failed mid-transaction goes away rather than back to the pool.
        if (broken && connection.destroy !== undefined) connection.destroy();
        else connection.release();
      }
    },
  };
}

/** The engine's statements on a single connection, one call at a time. */
function onOneConnection(connection: Mysql2ConnectionLike): EngineSide {
  let queue: Promise<unknown> = Promise.resolve();
  const serial = <T>(work: () => Promise<T>): Promise<T> => {
    const next = queue.then(work, work);
    queue = next.catch(() => undefined);
    return next;
  };
  return {
    execute: (query) =>
      serial(async () => mysqlRows((await connection.query(query.text, [...query.values]))[0])),
    executeAtomically: (queries) => serial(() => inTransaction(connection, queries)),
  };
}

/** The engine's transactions, at READ COMMITTED (see {@link ENGINE_ISOLATION_LEVEL}). */
async function inTransaction(
  connection: Mysql2ConnectionLike,
  queries: readonly SqlQuery[],
): Promise<Row[][]> {
  await connection.query(`SET TRANSACTION ISOLATION LEVEL ${ENGINE_ISOLATION_LEVEL}`);
  await connection.beginTransaction();
  try {
    const results: Row[][] = [];
    for (const query of queries)
      results.push(mysqlRows((await connection.query(query.text, [...query.values]))[0]));
    await connection.commit();
    return results;
  } catch (error) {
    await connection.rollback().catch(() => undefined);
    throw error;
  }
}

/** mysql2 marks errors that broke the connection `fatal`. */
function isConnectionError(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { fatal?: unknown }).fatal === true;
}
