/**
 * Kysely on Postgres (PostgresDialect over pg), on MariaDB (MysqlDialect over a mysql2 pool) and on
 * SQLite (SqliteDialect over better-sqlite3).
 */
import Database from 'better-sqlite3';
import { CamelCasePlugin, Kysely, MysqlDialect, PostgresDialect, SqliteDialect, sql } from 'kysely';
import { createPool } from 'mysql2';
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
  notTransactions: Record<string, unknown> = {},
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
    notTransactions: () => ({ 'the Kysely instance': db, ...notTransactions }),
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
  name: 'Kysely on MariaDB',
  dialect: 'mysql',
  sync: false,
  async open(target) {
    if (target.kind !== 'mysql') throw new Error('mysql only');
    const db = new Kysely<Tables>({
      dialect: new MysqlDialect({ pool: createPool({ uri: target.url, connectionLimit: 4 }) }),
      plugins: [new CamelCasePlugin()],
    });
    // A Kysely transaction the server no longer has (a COMMIT statement ended it): Kysely still
    // calls it a transaction, and only the server knows better.
    const ended = await db.startTransaction().execute();
    await sql`COMMIT`.execute(ended);
    return opened(
      db,
      kysely(db),
      async () => {
        await ended.rollback().execute();
        await db.destroy();
      },
      { 'a transaction a COMMIT statement ended on the server': ended },
    );
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
