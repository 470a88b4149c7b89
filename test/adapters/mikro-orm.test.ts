/** MikroORM 6 (@mikro-orm/postgresql) through the adapter behaviour suite. */
import { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import { mikroOrm, type MikroOrmEntityManager } from 'outboxer/mikro-orm';
import { nodePostgres } from 'outboxer/pg';
import { adapterBehaviour } from './behaviour.js';

adapterBehaviour<MikroOrmEntityManager>({
  name: 'MikroORM',
  dialect: 'postgres',
  sync: false,
  async open(target) {
    if (target.kind !== 'postgres') throw new Error('postgres only');
    const orm = await MikroORM.init({
      clientUrl: target.url,
      entities: [],
      discovery: { warnWhenNoEntities: false },
      pool: { min: 0, max: 4 },
      driverOptions: { connection: { options: `-c search_path=${target.schema}` } },
    });
    // MikroORM has no LISTEN: notify: true listens through a pg pool on the same database.
    const listenPool = new pg.Pool({ connectionString: target.urlWithSchema, max: 1 });
    return {
      database: mikroOrm(orm, { notifications: nodePostgres(listenPool) }),
      transaction: (fn) => orm.em.fork().transactional(async (em) => fn(em)),
      async rollback(fn) {
        const em = orm.em.fork();
        await em.begin();
        try {
          await fn(em);
        } finally {
          await em.rollback();
        }
      },
      notTransactions: () => ({
        'the global EntityManager': orm.em,
        'a fork outside a transaction': orm.em.fork(),
      }),
      async close() {
        await orm.close(true);
        await listenPool.end();
      },
    };
  },
});
