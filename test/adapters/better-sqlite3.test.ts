/** The reference synchronous adapter through the same behaviour suite as the data-layer adapters. */
import Database from 'better-sqlite3';
import { betterSqlite3, type BetterSqlite3DatabaseLike } from 'outboxer/better-sqlite3';
import { adapterBehaviour } from './behaviour.js';

class Rollback extends Error {}

adapterBehaviour<BetterSqlite3DatabaseLike>({
  name: 'better-sqlite3',
  dialect: 'sqlite',
  sync: true,
  async open(target) {
    if (target.kind !== 'sqlite') throw new Error('sqlite only');
    const db = new Database(target.file);
    db.pragma('journal_mode = WAL');
    return {
      database: betterSqlite3(db),
      async transaction(fn) {
        return db.transaction(() => {
          const result = fn(db);
          if (result instanceof Promise) throw new Error('better-sqlite3 transactions are synchronous');
          return result;
        })();
      },
      async rollback(fn) {
        try {
          db.transaction(() => {
            fn(db);
            throw new Rollback();
          })();
        } catch (error) {
          if (!(error instanceof Rollback)) throw error;
        }
      },
      notTransactions: () => ({
        'the database outside a transaction': db,
        'another database': new Database(':memory:'),
      }),
      close: async () => void db.close(),
    };
  },
});
