/**
 * MikroORM 7 on MariaDB through the adapter behaviour suite, with each of its two drivers for it:
 * @mikro-orm/mysql (MySqlPlatform) and @mikro-orm/mariadb (MariaDbPlatform, which extends it). On a
 * Node older than MikroORM's floor each is reported as one skipped test that says why.
 */
import { test } from 'vitest';
import { mikroOrm, type MikroOrmEntityManager } from 'outboxer/mikro-orm';
import { mikroOrmMissing } from '../support/mikro-orm.js';
import { adapterBehaviour } from './behaviour.js';
import { mikroOrmHarness } from './mikro-orm-harness.js';

const drivers = {
  '@mikro-orm/mysql': async () => (await import('@mikro-orm/mysql')).MikroORM,
  '@mikro-orm/mariadb': async () => (await import('@mikro-orm/mariadb')).MikroORM,
};

for (const [driver, load] of Object.entries(drivers)) {
  if (mikroOrmMissing !== undefined) {
    test.skip(`MikroORM adapter behaviour with ${driver}: ${mikroOrmMissing}`, () => undefined);
    continue;
  }
  adapterBehaviour<MikroOrmEntityManager>({
    name: `MikroORM (${driver})`,
    dialect: 'mysql',
    sync: false,
    async open(target) {
      if (target.kind !== 'mysql') throw new Error('mysql only');
      const MikroORM = await load();
      const orm = await MikroORM.init({
        clientUrl: target.url,
        entities: [],
        discovery: { warnWhenNoEntities: false },
        pool: { min: 0, max: 4 },
      });
      return { database: mikroOrm(orm), ...mikroOrmHarness(orm) };
    },
  });
}
