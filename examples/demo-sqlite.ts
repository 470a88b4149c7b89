/**
 * The demo's SQLite file, on Node's built-in node:sqlite where this Node has it (22.16+: nothing
 * to compile), and on better-sqlite3 elsewhere. Either way a transaction is a synchronous function
 * and publish inside it returns the id.
 */
import type * as NodeSqlite from 'node:sqlite';
import type { DatabaseAdapter } from 'outboxer';

/** What the demo does with its database, whichever library opened it. */
export interface DemoDatabase {
  /** `node:sqlite` or `better-sqlite3`: which library opened the file. */
  readonly library: string;
  /** The adapter; publish takes {@link connection} inside {@link transaction}. */
  readonly adapter: DatabaseAdapter<unknown, true>;
  readonly connection: unknown;
  /** Runs one statement with positional values. */
  run(sql: string, ...values: Array<string | number>): void;
  /** Runs `fn` in a transaction: commits when it returns, rolls back and rethrows when it throws. */
  transaction(fn: () => void): void;
  close(): void;
}

export async function openDemoDatabase(file: string): Promise<DemoDatabase> {
  const builtin = process.getBuiltinModule?.('node:sqlite') as typeof NodeSqlite | undefined;
  const db = builtin ? new builtin.DatabaseSync(file, { timeout: 5_000 }) : undefined;
  if (builtin && db && typeof db.isTransaction === 'boolean') {
    const { nodeSqlite } = await import('outboxer/node-sqlite');
    db.exec('PRAGMA journal_mode = WAL');
    return {
      library: 'node:sqlite',
      adapter: nodeSqlite(db),
      connection: db,
      run: (sql, ...values) => void db.prepare(sql).run(...values),
      transaction(fn) {
        db.exec('BEGIN');
        try {
          fn();
          db.exec('COMMIT');
        } catch (error) {
          db.exec('ROLLBACK');
          throw error;
        }
      },
      close: () => db.close(),
    };
  }
  db?.close();
  // Node older than 22.16: better-sqlite3, a native module that npm ci compiled.
  const { default: Database } = await import('better-sqlite3');
  const { betterSqlite3 } = await import('outboxer/better-sqlite3');
  const sqlite = new Database(file);
  sqlite.pragma('journal_mode = WAL');
  return {
    library: 'better-sqlite3',
    adapter: betterSqlite3(sqlite),
    connection: sqlite,
    run: (sql, ...values) => void sqlite.prepare(sql).run(...values),
    transaction: (fn) => sqlite.transaction(fn)(),
    close: () => sqlite.close(),
  };
}
