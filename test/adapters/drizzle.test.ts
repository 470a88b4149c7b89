/** Drizzle on node-postgres, on postgres.js and on better-sqlite3 (synchronous publish). */
import Database from 'better-sqlite3';
import { TransactionRollbackError } from 'drizzle-orm';
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3';
import { drizzle as drizzleNodePostgres } from 'drizzle-orm/node-postgres';
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js';
import pg from 'pg';
import postgres from 'postgres';
import { expect, test } from 'vitest';
import { drizzle, type DrizzlePgTransaction, type DrizzleSqliteTransaction } from 'outboxer/drizzle';
import { DATABASE_URL } from '../support/databases.js';
import { adapterBehaviour } from './behaviour.js';

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
      transaction: (fn) => db.transaction(async (tx) => fn(tx)),
      async rollback(fn) {
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
      close: () => sql.end({ timeout: 5 }),
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
