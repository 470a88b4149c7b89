/** Knex on Postgres (client pg) and on MariaDB (client mysql2) through the adapter behaviour suite. */
import createKnex from 'knex';
import pg from 'pg';
import { knex, type KnexTransaction } from 'outboxer/knex';
import { nodePostgres } from 'outboxer/pg';
import { expect } from 'vitest';
import { adapterBehaviour } from './behaviour.js';

/** Transactions the behaviour suite runs, and objects that are not open transactions. */
async function transactionsOf(db: ReturnType<typeof createKnex>) {
  const committed = await db.transaction();
  await committed.commit();
  return {
    transaction: <T>(fn: (trx: KnexTransaction) => Promise<T>) => db.transaction(async (trx) => fn(trx)),
    async rollback(fn: (trx: KnexTransaction) => Promise<unknown>) {
      const trx = await db.transaction();
      await fn(trx);
      await trx.rollback();
    },
    notTransactions: () => ({ 'the Knex instance': db, 'a committed transaction': committed }),
  };
}

adapterBehaviour<KnexTransaction>({
  name: 'Knex',
  dialect: 'postgres',
  sync: false,
  async open(target) {
    if (target.kind !== 'postgres') throw new Error('postgres only');
    const db = createKnex({ client: 'pg', connection: target.urlWithSchema, pool: { min: 0, max: 4 } });
    // Knex has no LISTEN: notify: true listens through a pg pool on the same database.
    const listenPool = new pg.Pool({ connectionString: target.urlWithSchema, max: 1 });
    return {
      database: knex(db, { notifications: nodePostgres(listenPool) }),
      ...(await transactionsOf(db)),
      async close() {
        await db.destroy();
        await listenPool.end();
      },
    };
  },
});

adapterBehaviour<KnexTransaction>({
  name: 'Knex on MariaDB',
  dialect: 'mysql',
  sync: false,
  async open(target) {
    if (target.kind !== 'mysql') throw new Error('mysql only');
    const db = createKnex({ client: 'mysql2', connection: target.url, pool: { min: 0, max: 4 } });
    return { database: knex(db), ...(await transactionsOf(db)), close: () => db.destroy() };
  },
});

// Publishing through Knex, the relay side (migrate, leases, polls, settlements, the admin API and
// LISTEN) on a plain pg pool: `relayDatabase: nodePostgres(pool)`.
adapterBehaviour<KnexTransaction>({
  name: 'Knex with relayDatabase on a pg pool',
  dialect: 'postgres',
  sync: false,
  async open(target) {
    if (target.kind !== 'postgres') throw new Error('postgres only');
    const db = createKnex({ client: 'pg', connection: target.urlWithSchema, pool: { min: 0, max: 4 } });
    const pool = new pg.Pool({ connectionString: target.urlWithSchema, max: 4 });
    // What goes through Knex, and how often the relay side took a connection of the pool.
    const viaKnex: string[] = [];
    db.on('query', (query: { sql: string }) => viaKnex.push(query.sql));
    let poolCheckouts = 0;
    pool.on('acquire', () => (poolCheckouts += 1));
    return {
      database: knex(db, { relayDatabase: nodePostgres(pool) }),
      ...(await transactionsOf(db)),
      async close() {
        // Knex carried the publishing statements only: nothing of the relay side touched it.
        expect(viaKnex.some((sql) => /^WITH inserted AS \(INSERT INTO/i.test(sql.trim()))).toBe(true);
        expect(viaKnex.filter((sql) => /_leases|_nodes|_config|CREATE /i.test(sql))).toEqual([]);
        expect(poolCheckouts).toBeGreaterThan(0);
        await db.destroy();
        await pool.end();
      },
    };
  },
});
