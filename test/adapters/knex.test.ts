/** Knex on Postgres (client pg) through the adapter behaviour suite. */
import createKnex from 'knex';
import pg from 'pg';
import { knex, type KnexTransaction } from 'outboxer/knex';
import { nodePostgres } from 'outboxer/pg';
import { adapterBehaviour } from './behaviour.js';

adapterBehaviour<KnexTransaction>({
  name: 'Knex',
  dialect: 'postgres',
  sync: false,
  async open(target) {
    if (target.kind !== 'postgres') throw new Error('postgres only');
    const db = createKnex({ client: 'pg', connection: target.urlWithSchema, pool: { min: 0, max: 4 } });
    // Knex has no LISTEN: notify: true listens through a pg pool on the same database.
    const listenPool = new pg.Pool({ connectionString: target.urlWithSchema, max: 1 });
    const committed = await db.transaction();
    await committed.commit();
    return {
      database: knex(db, { notifications: nodePostgres(listenPool) }),
      transaction: (fn) => db.transaction(async (trx) => fn(trx)),
      async rollback(fn) {
        const trx = await db.transaction();
        await fn(trx);
        await trx.rollback();
      },
      notTransactions: () => ({ 'the Knex instance': db, 'a committed transaction': committed }),
      async close() {
        await db.destroy();
        await listenPool.end();
      },
    };
  },
});
