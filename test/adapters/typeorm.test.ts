/** TypeORM (postgres, and mysql/mariadb over mysql2) through the adapter behaviour suite. */
import 'reflect-metadata';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { describe, expect, test } from 'vitest';
import { Outboxer } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { typeorm, type TypeOrmTransaction } from 'outboxer/typeorm';
import { DATABASE_URL, postgresFixture } from '../support/databases.js';
import { adapterBehaviour, type Opened } from './behaviour.js';

/** The harness's calls on an initialized DataSource: its transactions, and what is not one. */
function onDataSource(dataSource: DataSource): Omit<Opened<TypeOrmTransaction>, 'database'> {
  const idleRunner = dataSource.createQueryRunner();
  return {
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
    },
  };
}

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
    const calls = onDataSource(dataSource);
    return {
      ...calls,
      database: typeorm(dataSource, { notifications: nodePostgres(listenPool) }),
      async close() {
        await calls.close();
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

// MySQL and MariaDB: TypeORM's types "mysql" and "mariadb" both run its MySQL driver over mysql2.
for (const type of ['mysql', 'mariadb'] as const) {
  adapterBehaviour<TypeOrmTransaction>({
    name: `TypeORM (type "${type}")`,
    dialect: 'mysql',
    sync: false,
    async open(target) {
      if (target.kind !== 'mysql') throw new Error('mysql only');
      const dataSource = await new DataSource({ type, url: target.url, poolSize: 4 }).initialize();
      return { ...onDataSource(dataSource), database: typeorm(dataSource) };
    },
  });
}

describe('TypeORM on MySQL', () => {
  test('the dialect comes from the DataSource type; the option must agree with it', () => {
    // Not initialized: the adapter reads only the DataSource's options.
    const dataSource = new DataSource({ type: 'mariadb', url: 'mysql://root@127.0.0.1:3306/test' });
    expect(typeorm(dataSource).dialect.name).toBe('mysql');
    expect(typeorm(dataSource, { dialect: 'mysql' }).dialect.name).toBe('mysql');
    expect(() => typeorm(dataSource, { dialect: 'postgres' })).toThrow(
      expect.objectContaining({
        code: 'INVALID_OPTIONS',
        message: expect.stringMatching(/"typeorm.dialect"/),
      }),
    );
    const sqlite = new DataSource({ type: 'better-sqlite3', database: ':memory:' });
    expect(() => typeorm(sqlite)).toThrow(
      expect.objectContaining({
        code: 'DATABASE_UNSUPPORTED',
        message: expect.stringMatching(/"better-sqlite3"/),
      }),
    );
  });
});
