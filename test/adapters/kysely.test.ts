/** Kysely on Postgres (PostgresDialect over pg) and on SQLite (SqliteDialect over better-sqlite3). */
import Database from 'better-sqlite3';
import { CamelCasePlugin, Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import { kysely, type KyselyTransaction } from 'outboxer/kysely';
import { nodePostgres } from 'outboxer/pg';
import { adapterBehaviour, type Opened } from './behaviour.js';

/** Outboxer's statements are raw SQL: the harness needs no table types. */
type Tables = Record<string, never>;

function opened(
  db: Kysely<Tables>,
  database: Opened<KyselyTransaction>['database'],
  close: () => Promise<void>,
): Opened<KyselyTransaction> {
  return {
    database,
    transaction: (fn) => db.transaction().execute(async (trx) => fn(trx)),
    async rollback(fn) {
      // A controlled transaction, rolled back explicitly.
      const trx = await db.startTransaction().execute();
      await fn(trx);
      await trx.rollback().execute();
    },
    notTransactions: () => ({ 'the Kysely instance': db }),
    close,
  };
}

adapterBehaviour<KyselyTransaction>({
  name: 'Kysely on Postgres',
  dialect: 'postgres',
  sync: false,
  async open(target) {
    if (target.kind !== 'postgres') throw new Error('postgres only');
    const pool = new pg.Pool({ connectionString: target.urlWithSchema, max: 4 });
    // CamelCasePlugin would rename group_key to groupKey: the adapter runs without plugins.
    const db = new Kysely<Tables>({
      dialect: new PostgresDialect({ pool }),
      plugins: [new CamelCasePlugin()],
    });
    return opened(db, kysely(db, { notifications: nodePostgres(pool) }), () => db.destroy());
  },
});

adapterBehaviour<KyselyTransaction>({
  name: 'Kysely on SQLite',
  dialect: 'sqlite',
  sync: false,
  async open(target) {
    if (target.kind !== 'sqlite') throw new Error('sqlite only');
    const sqlite = new Database(target.file);
    sqlite.pragma('journal_mode = WAL');
    const db = new Kysely<Tables>({
      dialect: new SqliteDialect({ database: sqlite }),
      plugins: [new CamelCasePlugin()],
    });
    return opened(db, kysely(db), () => db.destroy());
  },
});
