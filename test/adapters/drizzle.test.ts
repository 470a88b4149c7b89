/** Drizzle on node-postgres, on postgres.js, on mysql2 (MariaDB) and on better-sqlite3 (synchronous publish). */
import Database from 'better-sqlite3';
import { TransactionRollbackError } from 'drizzle-orm';
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3';
import { drizzle as drizzleMysql2 } from 'drizzle-orm/mysql2';
import { drizzle as drizzleNodePostgres } from 'drizzle-orm/node-postgres';
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js';
import { drizzle as drizzleSingleStore } from 'drizzle-orm/singlestore';
import { createConnection, createPool } from 'mysql2';
import pg from 'pg';
import postgres from 'postgres';
import { expect, test } from 'vitest';
import {
  drizzle,
  type DrizzleMysqlTransaction,
  type DrizzlePgTransaction,
  type DrizzleSqliteTransaction,
} from 'outboxer/drizzle';
import { DATABASE_URL, MARIADB_URL } from '../support/databases.js';
import { adapterBehaviour, type Opened } from './behaviour.js';

/** The transactions of an asynchronous Drizzle database (Postgres, MySQL), and what is not one. */
function asyncTransactions<Tx>(db: {
  transaction<T>(fn: (tx: Tx & { rollback(): never }) => Promise<T>): Promise<T>;
}): Pick<Opened<Tx>, 'transaction' | 'rollback' | 'notTransactions'> {
  return {
    transaction: (fn) => db.transaction(async (tx) => fn(tx)),
    async rollback(fn) {
      // tx.rollback() throws a TransactionRollbackError: db.transaction rolls back and rethrows it.
      await db
        .transaction(async (tx) => {
          await fn(tx);
          tx.rollback();
        })
        .catch((error: unknown) => {
          if (!(error instanceof TransactionRollbackError)) throw error;
        });
    },
    notTransactions: () => ({ 'the Drizzle database': db }),
  };
}

adapterBehaviour<DrizzlePgTransaction>({
  name: 'Drizzle on node-postgres',
  dialect: 'postgres',
  sync: false,
  async open(target) {
    if (target.kind !== 'postgres') throw new Error('postgres only');
    const pool = new pg.Pool({ connectionString: target.urlWithSchema, max: 4 });
    const db = drizzleNodePostgres(pool);
    return {
      database: drizzle(db),
      ...asyncTransactions(db),
      close: () => pool.end(),
    };
  },
});

adapterBehaviour<DrizzlePgTransaction>({
  name: 'Drizzle on postgres.js',
  dialect: 'postgres',
  sync: false,
  async open(target) {
    if (target.kind !== 'postgres') throw new Error('postgres only');
    const sql = postgres(target.url, {
      max: 4,
      onnotice: () => undefined,
      connection: { search_path: target.schema },
    });
    const db = drizzlePostgresJs(sql);
    return {
      database: drizzle(db),
      ...asyncTransactions(db),
      close: () => sql.end({ timeout: 5 }),
    };
  },
});

adapterBehaviour<DrizzleMysqlTransaction>({
  name: 'Drizzle on mysql2 (MariaDB)',
  dialect: 'mysql',
  sync: false,
  async open(target) {
    if (target.kind !== 'mysql') throw new Error('mysql only');
    // A pool of mysql2's callback API, as drizzle(url) makes: the relay side uses its promise().
    const pool = createPool({ uri: target.url, connectionLimit: 4 });
    const db = drizzleMysql2(pool);
    return {
      database: drizzle(db),
      ...asyncTransactions(db),
      close: () =>
        new Promise<void>((resolve, reject) => pool.end((error) => (error ? reject(error) : resolve()))),
    };
  },
});

adapterBehaviour<DrizzleSqliteTransaction>({
  name: 'Drizzle on better-sqlite3',
  dialect: 'sqlite',
  sync: true,
  async open(target) {
    if (target.kind !== 'sqlite') throw new Error('sqlite only');
    const sqlite = new Database(target.file);
    sqlite.pragma('journal_mode = WAL');
    const db = drizzleSqlite(sqlite);
    let ended: DrizzleSqliteTransaction | undefined;
    return {
      database: drizzle(db),
      async transaction(fn) {
        return db.transaction((tx) => {
          const result = fn(tx);
          if (result instanceof Promise)
            throw new Error('Drizzle transactions on better-sqlite3 are synchronous');
          return result;
        });
      },
      async rollback(fn) {
        try {
          db.transaction((tx) => {
            fn(tx);
            tx.rollback();
          });
        } catch (error) {
          if (!(error instanceof TransactionRollbackError)) throw error;
        }
      },
      notTransactions: () => {
        db.transaction((tx) => void (ended = tx));
        return { 'the Drizzle database': db, 'a transaction that has ended': ended };
      },
      close: async () => void sqlite.close(),
    };
  },
});

test('Drizzle over a single pg.Client publishes, and its relay side asks for relayDatabase', async () => {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  const adapter = drizzle(drizzleNodePostgres(client));
  await expect(adapter.execute({ text: 'SELECT 1', values: [] })).rejects.toMatchObject({
    code: 'DATABASE_UNSUPPORTED',
    message: expect.stringContaining('relayDatabase: nodePostgres(pool)'),
  });
});

test('Drizzle over a single mysql2 connection publishes, and its relay side asks for relayDatabase', async () => {
  const connection = createConnection({ uri: MARIADB_URL });
  try {
    const db = drizzleMysql2(connection);
    const adapter = drizzle(db);
    expect(adapter.dialect.name).toBe('mysql');
    await db.transaction(async (tx) => {
      await expect(
        adapter.executeInTransaction(tx, { text: 'SELECT ? AS one', values: [1] }),
      ).resolves.toEqual([{ one: 1 }]);
    });
    await expect(adapter.execute({ text: 'SELECT 1', values: [] })).rejects.toMatchObject({
      code: 'DATABASE_UNSUPPORTED',
      message: expect.stringContaining('relayDatabase: mysql2(pool)'),
    });
  } finally {
    await connection.promise().end();
  }
});

test('Drizzle on a database outboxer has no dialect for is refused, naming it', () => {
  const pool = createPool({ uri: MARIADB_URL });
  try {
    expect(() => drizzle(drizzleSingleStore(pool) as never)).toThrow(
      expect.objectContaining({
        code: 'DATABASE_UNSUPPORTED',
        message: expect.stringContaining('this database is SingleStoreDriverDatabase'),
      }),
    );
  } finally {
    pool.end();
  }
});
