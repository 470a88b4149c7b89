/**
 * The reference synchronous adapter through the same behaviour suite as the data-layer adapters,
 * on the current line of better-sqlite3 and on the older one kept beside it (TypeORM 1.1 still
 * declares ^12).
 */
import Database from 'better-sqlite3';
import DatabaseV12 from 'better-sqlite3-v12';
import { betterSqlite3, type BetterSqlite3DatabaseLike } from 'outboxer/better-sqlite3';
import { adapterBehaviour } from './behaviour.js';

class Rollback extends Error {}

const lines = [
  { Database, version: '13' },
  { Database: DatabaseV12, version: '12' },
] as const;

for (const { Database, version } of lines) {
  adapterBehaviour<BetterSqlite3DatabaseLike>({
    name: `better-sqlite3 ${version}`,
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
}
