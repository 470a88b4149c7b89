import type { DatabaseAdapter, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { sqliteDialect } from '../../dialects/sqlite/sqlite-dialect.js';

interface StatementLike {
  readonly reader: boolean;
  all(...values: unknown[]): unknown[];
  run(...values: unknown[]): unknown;
}

/** The part of a better-sqlite3 `Database` outboxer uses. */
export interface BetterSqlite3DatabaseLike {
  prepare(sql: string): StatementLike;
  transaction(fn: (queries: readonly SqlQuery[]) => Row[][]): {
    immediate(queries: readonly SqlQuery[]): Row[][];
  };
  readonly inTransaction: boolean;
  readonly open: boolean;
}

/**
 * The better-sqlite3 adapter. `publish` runs synchronously inside `db.transaction(() => …)` and
 * returns the id, not a promise. Relays use the same connection between the application's
 * transactions; never a write transaction open while a destination is called.
 *
 * @example
 * import Database from 'better-sqlite3';
 * const db = new Database('app.db');
 * db.pragma('journal_mode = WAL');
 * const outboxer = new Outboxer({ database: betterSqlite3(db), outboxes: { ... } });
 * db.transaction(() => { insertOrder.run(order); outboxer.publish(db, 'orders', order, { groupKey: `order:${order.id}` }); })();
 */
export function betterSqlite3(
  db: BetterSqlite3DatabaseLike,
): DatabaseAdapter<BetterSqlite3DatabaseLike, true> {
  const statements = new Map<string, StatementLike>();
  const run = (query: SqlQuery): Row[] => {
    let statement = statements.get(query.text);
    if (statement === undefined) {
      statement = db.prepare(query.text);
      statements.set(query.text, statement);
    }
    if (statement.reader) return statement.all(...query.values) as Row[];
    statement.run(...query.values);
    return [];
  };
  const atomically = db.transaction((queries: readonly SqlQuery[]) => queries.map(run));
  return {
    dialect: sqliteDialect,
    sync: true,
    executeInTransaction(tx, query) {
      if (tx !== db) {
        throw new OutboxerError(
          'NOT_IN_TRANSACTION',
          'publish() must be given the same better-sqlite3 Database that betterSqlite3() was created with.',
        );
      }
      if (!tx.inTransaction) {
        throw new OutboxerError(
          'NOT_IN_TRANSACTION',
          'publish() was called outside a transaction. Call it inside db.transaction(() => { ... })() so the message commits with your change.',
        );
      }
      return run(query);
    },
    execute: async (query) => run(query),
    // BEGIN IMMEDIATE: takes the write lock up front instead of failing with SQLITE_BUSY half-way.
    executeAtomically: async (queries) => atomically.immediate(queries),
  };
}
