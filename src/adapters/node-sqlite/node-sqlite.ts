import type { DatabaseAdapter, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { sqliteDialect } from '../../dialects/sqlite/sqlite-dialect.js';

/** The part of a node:sqlite `StatementSync` outboxer uses. */
interface StatementSyncLike {
  all(...values: unknown[]): unknown[];
  setReadBigInts(enabled: boolean): void;
}

/**
 * The part of a node:sqlite `DatabaseSync` (Node 22.16+, 24) outboxer uses. Structural, so that
 * importing `outboxer/node-sqlite` never loads `node:sqlite` itself.
 */
export interface NodeSqliteDatabaseLike {
  prepare(sql: string): StatementSyncLike;
  exec(sql: string): void;
  /** True between `BEGIN` and `COMMIT`/`ROLLBACK` (Node 22.16+; absent before). */
  readonly isTransaction: boolean;
}

/**
 * The node:sqlite adapter, for Node's built-in `DatabaseSync`: SQLite with no native module to
 * compile. Its transactions are the statements between `db.exec('BEGIN')` and `db.exec('COMMIT')`,
 * run synchronously, so `publish` returns the id, not a promise. Relays use the same connection
 * between the application's transactions, and refuse to run while one is open on it (an error
 * with code `INVALID_STATE`, retried by the worker), so that their writes never commit or roll
 * back with yours.
 *
 * @example
 * import { DatabaseSync } from 'node:sqlite';
 * const db = new DatabaseSync('app.db', { timeout: 5_000 });
 * db.exec('PRAGMA journal_mode = WAL');
 * const outboxer = new Outboxer({ database: nodeSqlite(db), outboxes: { ... } });
 * db.exec('BEGIN');
 * try {
 *   insertOrder.run(order.id, order.total);
 *   outboxer.publish(db, 'orders', order, { groupKey: `order:${order.id}` });
 *   db.exec('COMMIT');
 * } catch (error) {
 *   db.exec('ROLLBACK');
 *   throw error;
 * }
 */
export function nodeSqlite(db: NodeSqliteDatabaseLike): DatabaseAdapter<NodeSqliteDatabaseLike, true> {
  if (typeof db?.prepare !== 'function' || typeof db.isTransaction !== 'boolean') {
    throw new OutboxerError(
      'DATABASE_UNSUPPORTED',
      'nodeSqlite() needs a DatabaseSync from node:sqlite with isTransaction, which Node 22.16 and later have. Upgrade Node, or use outboxer/better-sqlite3.',
    );
  }
  const statements = new Map<string, StatementSyncLike>();
  const run = (query: SqlQuery): Row[] => {
    let statement = statements.get(query.text);
    if (statement === undefined) {
      statement = db.prepare(query.text);
      // Ids and counts come back as numbers even if the database was opened with readBigInts.
      statement.setReadBigInts(false);
      statements.set(query.text, statement);
    }
    // The empty object binds no named parameters: without it, node:sqlite would read a first value
    // that is a plain object as named parameters instead of binding it to the first `?`.
    return statement.all({}, ...query.values) as Row[];
  };
  const outsideTransactions = (what: string) => {
    if (db.isTransaction) {
      throw new OutboxerError(
        'INVALID_STATE',
        `outboxer's ${what} cannot run while a transaction is open on the node:sqlite connection: it would commit or roll back with it. Do not hold a transaction open across an await, or give outboxer a DatabaseSync of its own on the same file.`,
        { retryable: true },
      );
    }
  };
  return {
    dialect: sqliteDialect,
    sync: true,
    executeInTransaction(tx, query) {
      if (tx !== db) {
        throw new OutboxerError(
          'NOT_IN_TRANSACTION',
          'publish() must be given the same DatabaseSync that nodeSqlite() was created with.',
        );
      }
      if (!tx.isTransaction) {
        throw new OutboxerError(
          'NOT_IN_TRANSACTION',
          "publish() was called outside a transaction. Call it between db.exec('BEGIN') and db.exec('COMMIT') so the message commits with your change.",
        );
      }
      return run(query);
    },
    execute: async (query) => {
      outsideTransactions('statement');
      return run(query);
    },
    executeAtomically: async (queries) => {
      outsideTransactions('transaction');
      // BEGIN IMMEDIATE: takes the write lock up front instead of failing with SQLITE_BUSY half-way.
      db.exec('BEGIN IMMEDIATE');
      try {
        const rows = queries.map(run);
        db.exec('COMMIT');
        return rows;
      } catch (error) {
        if (db.isTransaction) db.exec('ROLLBACK');
        throw error;
      }
    },
  };
}
