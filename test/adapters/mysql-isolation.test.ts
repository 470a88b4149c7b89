/**
 * The relay side's transactions on MySQL run at READ COMMITTED through every adapter (mysql2,
 * Kysely, Drizzle, Knex, TypeORM, Prisma), whatever the server's default (REPEATABLE READ on
 * MariaDB and MySQL) or the library's setting: under REPEATABLE READ a settle's searches lock the
 * gaps between index entries too, and a publisher inserting into such a gap waits for it.
 * Seen from inside one `executeAtomically`: a row committed by another connection after the
 * transaction's first read is visible to its next read at READ COMMITTED, invisible at REPEATABLE
 * READ (which reads the first read's snapshot).
 */
import 'reflect-metadata';
import { PrismaMariaDb } from '@prisma/adapter-mariadb';
import { drizzle as drizzleMysql2 } from 'drizzle-orm/mysql2';
import { Kysely, MysqlDialect } from 'kysely';
import createKnex from 'knex';
import { createPool } from 'mysql2';
import mysql from 'mysql2/promise';
import type { DatabaseAdapter } from 'outboxer';
import { drizzle } from 'outboxer/drizzle';
import { knex } from 'outboxer/knex';
import { kysely } from 'outboxer/kysely';
import { mikroOrm } from 'outboxer/mikro-orm';
import { mysql2 } from 'outboxer/mysql2';
import { prisma } from 'outboxer/prisma';
import { typeorm } from 'outboxer/typeorm';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { mariadbFixture } from '../support/databases.js';
import { mikroOrmMissing } from '../support/mikro-orm.js';
import { waitUntil } from '../support/random.js';
import { loadPrismaClient } from './prisma/client.js';

type Fixture = Awaited<ReturnType<typeof mariadbFixture>>;

type Opened = { adapter: DatabaseAdapter; close(): Promise<unknown> };

/** Each adapter over its library on the fixture's database, and how to close the library. */
const adapters: Array<[string, (url: string) => Opened | Promise<Opened>]> = [
  [
    'mysql2',
    async (url) => {
      const pool = mysql.createPool({ uri: url, connectionLimit: 2 });
      return { adapter: mysql2(pool), close: () => pool.end() };
    },
  ],
  [
    'Kysely',
    async (url) => {
      const db = new Kysely({
        dialect: new MysqlDialect({ pool: createPool({ uri: url, connectionLimit: 2 }) }),
      });
      return { adapter: kysely(db), close: () => db.destroy() };
    },
  ],
  [
    // Drizzle's relay side is outboxer/mysql2 on the pool it wraps: a pool of mysql2's callback API here.
    'Drizzle',
    async (url) => {
      const pool = createPool({ uri: url, connectionLimit: 2 });
      return { adapter: drizzle(drizzleMysql2(pool)), close: () => pool.promise().end() };
    },
  ],
  [
    'Knex',
    async (url) => {
      const db = createKnex({ client: 'mysql2', connection: url, pool: { min: 0, max: 2 } });
      return { adapter: knex(db), close: () => db.destroy() };
    },
  ],
  [
    // The DataSource's own isolation level (REPEATABLE READ, set here) is not the relay side's.
    'TypeORM',
    async (url) => {
      const dataSource = new DataSource({
        type: 'mysql',
        url,
        poolSize: 2,
        isolationLevel: 'REPEATABLE READ',
      });
      await dataSource.initialize();
      return { adapter: typeorm(dataSource), close: () => dataSource.destroy() };
    },
  ],
  [
    'Prisma',
    async (url) => {
      const { PrismaClient } = await loadPrismaClient('mysql');
      const client = new PrismaClient({ adapter: new PrismaMariaDb(url) });
      return { adapter: prisma(client), close: () => client.$disconnect() };
    },
  ],
  // MikroORM's relay side is outboxer/mysql2 on its driver's pool (where MikroORM 7 runs: Node 22.17+).
  ...(mikroOrmMissing === undefined
    ? [
        [
          'MikroORM',
          async (url: string) => {
            const { MikroORM } = await import('@mikro-orm/mysql');
            const orm = new MikroORM({
              clientUrl: url,
              entities: [],
              discovery: { warnWhenNoEntities: false },
              pool: { min: 0, max: 2 },
            });
            return { adapter: mikroOrm(orm), close: () => orm.close(true) };
          },
        ] satisfies [string, (url: string) => Promise<Opened>],
      ]
    : []),
];

let fixture: Fixture;
beforeAll(async () => {
  fixture = await mariadbFixture(4);
  await fixture.query(`CREATE TABLE gate (id INT PRIMARY KEY)`);
  await fixture.query(`INSERT INTO gate (id) VALUES (1)`);
});
afterAll(() => fixture?.close());

test.each(adapters)(
  '%s: a read of executeAtomically sees what another connection committed after the first read',
  async (name, open) => {
    const seen = `seen_${name.toLowerCase()}`;
    await fixture.query(`CREATE TABLE ${seen} (id INT PRIMARY KEY)`);
    const { adapter, close } = await open(fixture.url);
    // Holds the gate row, so that the batch's second statement waits there, after its first read.
    const holder = await fixture.pool.getConnection();
    try {
      await holder.beginTransaction();
      await holder.query(`SELECT id FROM gate WHERE id = 1 FOR UPDATE`);
      const results = adapter.executeAtomically([
        { text: `SELECT COUNT(*) AS n FROM ${seen}`, values: [] },
        { text: `SELECT id FROM gate WHERE id = 1 FOR UPDATE`, values: [] },
        { text: `SELECT COUNT(*) AS n FROM ${seen}`, values: [] },
      ]);
      await waitUntil(
        async () =>
          (
            await fixture.query(
              `SELECT info FROM information_schema.PROCESSLIST WHERE db = ? AND info LIKE 'SELECT id FROM gate%'`,
              [fixture.schema],
            )
          ).length === 1,
        10_000,
        'the batch to wait on the gate row',
      );
      await fixture.query(`INSERT INTO ${seen} (id) VALUES (1)`);
      await holder.commit();
      const [before, , after] = await results;
      expect(Number(before![0]!.n)).toBe(0);
      expect(Number(after![0]!.n)).toBe(1);
    } finally {
      holder.release();
      await close();
    }
  },
);
