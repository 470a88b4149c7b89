/** TypeORM (postgres driver) through the adapter behaviour suite. */
import 'reflect-metadata';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { expect, test } from 'vitest';
import { Outboxer } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { typeorm, type TypeOrmTransaction } from 'outboxer/typeorm';
import { DATABASE_URL, postgresFixture } from '../support/databases.js';
import { adapterBehaviour } from './behaviour.js';

adapterBehaviour<TypeOrmTransaction>({
  name: 'TypeORM',
  dialect: 'postgres',
  sync: false,
  async open(target) {
    if (target.kind !== 'postgres') throw new Error('postgres only');
    const dataSource = await new DataSource({
      type: 'postgres',
      url: target.urlWithSchema,
      poolSize: 4,
    }).initialize();
    // TypeORM has no LISTEN: notify: true listens through a pg pool on the same database.
    const listenPool = new pg.Pool({ connectionString: target.urlWithSchema, max: 1 });
    const idleRunner = dataSource.createQueryRunner();
    return {
      database: typeorm(dataSource, { notifications: nodePostgres(listenPool) }),
      transaction: (fn) => dataSource.transaction(async (manager) => fn(manager)),
      async rollback(fn) {
        // A transaction of our own on a query runner, published through its manager.
        const runner = dataSource.createQueryRunner();
        await runner.connect();
        await runner.startTransaction();
        try {
          await fn(runner.manager);
        } finally {
          await runner.rollbackTransaction();
          await runner.release();
        }
      },
      notTransactions: () => ({
        'the DataSource': dataSource,
        'dataSource.manager': dataSource.manager,
        'a query runner without a transaction': idleRunner,
        'the manager of a query runner without a transaction': idleRunner.manager,
      }),
      async close() {
        await idleRunner.release();
        await dataSource.destroy();
        await listenPool.end();
      },
    };
  },
});

test('publish also takes the QueryRunner of a transaction started by hand', async () => {
  const fixture = await postgresFixture(2);
  const dataSource = await new DataSource({
    type: 'postgres',
    url: DATABASE_URL,
    poolSize: 2,
    extra: { options: `-c search_path=${fixture.schema}` },
  }).initialize();
  try {
    const outboxer = new Outboxer({
      database: typeorm(dataSource),
      outboxes: { events: { table: 'by_runner' } },
      relay: false,
    });
    await outboxer.migrate();
    const runner = dataSource.createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    const id = await outboxer.publish(runner, 'events', { n: 1 });
    await runner.commitTransaction();
    await runner.release();
    await expect(outboxer.publish(runner, 'events', { n: 2 })).rejects.toMatchObject({
      code: 'NOT_IN_TRANSACTION',
    });
    expect(await fixture.query('SELECT id FROM by_runner')).toEqual([{ id: String(id) }]);
  } finally {
    await dataSource.destroy();
    await fixture.close();
  }
});
