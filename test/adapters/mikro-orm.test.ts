/**
 * MikroORM 7 on PostgreSQL (@mikro-orm/postgresql) through the adapter behaviour suite, with the
 * LISTEN of the ORM's own pool for notify: true. On a Node older than MikroORM's floor the suite is
 * reported as one skipped test that says why.
 */
import { test } from 'vitest';
import { mikroOrm, type MikroOrmEntityManager } from 'outboxer/mikro-orm';
import { mikroOrmMissing } from '../support/mikro-orm.js';
import { adapterBehaviour } from './behaviour.js';
import { mikroOrmHarness } from './mikro-orm-harness.js';

if (mikroOrmMissing !== undefined) {
  test.skip(`MikroORM adapter behaviour on Postgres: ${mikroOrmMissing}`, () => undefined);
} else {
  adapterBehaviour<MikroOrmEntityManager>({
    name: 'MikroORM',
    dialect: 'postgres',
    sync: false,
    async open(target) {
      if (target.kind !== 'postgres') throw new Error('postgres only');
      const { MikroORM } = await import('@mikro-orm/postgresql');
      const orm = await MikroORM.init({
        clientUrl: target.url,
        entities: [],
        discovery: { warnWhenNoEntities: false },
        pool: { min: 0, max: 4 },
        // MikroORM 7 hands driverOptions to pg's Pool (6 handed them to Knex, under `connection`).
        driverOptions: { options: `-c search_path=${target.schema}` },
      });
      return { database: mikroOrm(orm), ...mikroOrmHarness(orm) };
    },
  });
}
