/** The mysql2 adapter (pool and single connection) through the shared behaviour suite, on MariaDB. */
import mysql from 'mysql2/promise';
import { mysql2, type Mysql2TransactionConnection } from 'outboxer/mysql2';
import { adapterBehaviour } from './behaviour.js';

async function inTransaction<T>(
  connection: mysql.Connection,
  fn: (tx: Mysql2TransactionConnection) => T | Promise<T>,
  commit: boolean,
): Promise<T> {
  await connection.beginTransaction();
  try {
    const result = await fn(connection as unknown as Mysql2TransactionConnection);
    await (commit ? connection.commit() : connection.rollback());
    return result;
  } catch (error) {
    await connection.rollback();
    throw error;
  }
}

adapterBehaviour<Mysql2TransactionConnection>({
  name: 'mysql2 (pool)',
  dialect: 'mysql',
  sync: false,
  async open(target) {
    if (target.kind !== 'mysql') throw new Error('mysql only');
    const pool = mysql.createPool({ uri: target.url, connectionLimit: 4 });
    const withConnection = async <T>(fn: (connection: mysql.PoolConnection) => Promise<T>): Promise<T> => {
      const connection = await pool.getConnection();
      try {
        return await fn(connection);
      } finally {
        connection.release();
      }
    };
    const idle = await pool.getConnection();
    return {
      database: mysql2(pool),
      transaction: (fn) => withConnection((c) => inTransaction(c, fn, true)),
      rollback: async (fn) => void (await withConnection((c) => inTransaction(c, fn, false))),
      // A pool, and a connection in autocommit (no transaction open).
      notTransactions: () => ({ pool, idle }),
      close: async () => {
        idle.release();
        await pool.end();
      },
    };
  },
});

adapterBehaviour<Mysql2TransactionConnection>({
  name: 'mysql2 (connection)',
  dialect: 'mysql',
  sync: false,
  async open(target) {
    if (target.kind !== 'mysql') throw new Error('mysql only');
    // Publishing on one connection; the engine's side on the same connection, between transactions.
    const connection = await mysql.createConnection({ uri: target.url });
    const autocommit = await mysql.createConnection({ uri: target.url });
    // Each transaction of the test on a connection of its own, so that two can run at once.
    const onNewConnection = async <T>(fn: (c: mysql.Connection) => Promise<T>): Promise<T> => {
      const c = await mysql.createConnection({ uri: target.url });
      try {
        return await fn(c);
      } finally {
        await c.end();
      }
    };
    return {
      database: mysql2(connection),
      transaction: (fn) => onNewConnection((c) => inTransaction(c, fn, true)),
      rollback: (fn) => onNewConnection((c) => inTransaction(c, fn, false)).then(() => undefined),
      notTransactions: () => ({ autocommit }),
      close: async () => {
        await connection.end();
        await autocommit.end();
      },
    };
  },
});
