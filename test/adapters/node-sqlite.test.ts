/**
 * Node's built-in SQLite through the same behaviour suite as better-sqlite3. On a Node without a
 * usable node:sqlite (before 22.16) the suite is reported as one skipped test that says why.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { Outboxer, functionRelay, isOutboxerError } from 'outboxer';
import { nodeSqlite, type NodeSqliteDatabaseLike } from 'outboxer/node-sqlite';
import { DatabaseSync, nodeSqliteMissing } from '../support/node-sqlite.js';
import { adapterBehaviour } from './behaviour.js';

class Rollback extends Error {}

if (DatabaseSync === undefined) {
  test.skip(`node-sqlite adapter behaviour: ${nodeSqliteMissing}`, () => undefined);
} else {
  const Database = DatabaseSync;
  adapterBehaviour<NodeSqliteDatabaseLike>({
    name: 'node-sqlite',
    dialect: 'sqlite',
    sync: true,
    async open(target) {
      if (target.kind !== 'sqlite') throw new Error('sqlite only');
      const db = new Database(target.file, { timeout: 5_000 });
      db.exec('PRAGMA journal_mode = WAL');
      const inTransaction = <T>(fn: (tx: NodeSqliteDatabaseLike) => T): T => {
        db.exec('BEGIN');
        try {
          const result = fn(db);
          if (result instanceof Promise) throw new Error('node:sqlite transactions are synchronous here');
          db.exec('COMMIT');
          return result;
        } catch (error) {
          if (db.isTransaction) db.exec('ROLLBACK');
          throw error;
        }
      };
      return {
        database: nodeSqlite(db),
        transaction: async (fn) => inTransaction(fn),
        async rollback(fn) {
          try {
            inTransaction((tx) => {
              fn(tx);
              throw new Rollback();
            });
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

  test('a DatabaseSync without isTransaction (before Node 22.16) is refused with DATABASE_UNSUPPORTED', () => {
    const older = { prepare: () => undefined, exec: () => undefined } as unknown as NodeSqliteDatabaseLike;
    let error: unknown;
    try {
      nodeSqlite(older);
    } catch (caught) {
      error = caught;
    }
    expect(isOutboxerError(error) && error.code).toBe('DATABASE_UNSUPPORTED');
  });

  test("the relay side refuses to run inside the application's open transaction, retryably", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'outboxer-node-sqlite-'));
    const db = new Database(join(dir, 'app.db'));
    try {
      const outboxer = new Outboxer({
        database: nodeSqlite(db),
        outboxes: { events: { relay: functionRelay(async () => undefined) } },
        testing: 'manual',
      });
      await outboxer.migrate();
      // A transaction held open across an await: the admin API's statement would join it.
      db.exec('BEGIN');
      const refused = await outboxer.counts('events').then(
        () => undefined,
        (error: unknown) => error,
      );
      db.exec('ROLLBACK');
      expect(isOutboxerError(refused) && [refused.code, refused.retryable]).toEqual(['INVALID_STATE', true]);
      expect(await outboxer.counts('events')).toMatchObject({ pending: 0 });
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
