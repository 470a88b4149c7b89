/**
 * Every data-layer adapter opened on a target of the suite: a Postgres scratch schema reached
 * through the logging proxy (so the wire shows what the library really sent), or a SQLite file
 * whose statements better-sqlite3 logs. The same libraries and set-ups as test/adapters/*.test.ts.
 */
import 'reflect-metadata';
import { MikroORM } from '@mikro-orm/postgresql';
import { PrismaPg } from '@prisma/adapter-pg';
import Database from 'better-sqlite3';
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3';
import { drizzle as drizzleNodePostgres } from 'drizzle-orm/node-postgres';
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js';
import createKnex from 'knex';
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import postgres from 'postgres';
import { DataSource } from 'typeorm';
import type { DatabaseAdapter } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { drizzle } from 'outboxer/drizzle';
import { knex } from 'outboxer/knex';
import { kysely } from 'outboxer/kysely';
import { mikroOrm } from 'outboxer/mikro-orm';
import { nodePostgres } from 'outboxer/pg';
import { postgresJs } from 'outboxer/postgres-js';
import { prisma } from 'outboxer/prisma';
import { typeorm } from 'outboxer/typeorm';
import { loadPrismaClient } from '../adapters/prisma/client.js';
import { inPgTransaction } from './support.js';

export type Target =
  | { readonly kind: 'postgres'; readonly url: string; readonly schema: string }
  | { readonly kind: 'sqlite'; readonly file: string };

/** The library open on the target: its adapter, a transaction of its own, and how to close it. */
export interface Opened {
  readonly database: DatabaseAdapter<never, boolean>;
  /** Runs `fn` in a transaction of the library and commits; synchronous `fn` for a sync library. */
  transaction(fn: (tx: never) => unknown): Promise<void>;
  close(): Promise<void>;
}

export interface Harness {
  readonly name: string;
  readonly kind: Target['kind'];
  /**
   * The library writes the values into the statement's text itself, quoted by pg's escapeLiteral,
   * instead of binding them (MikroORM's `connection.execute`; docs/adapters/mikro-orm.md).
   */
  readonly inlinesValues?: boolean;
  open(target: Target): Promise<Opened>;
}

const as = (database: unknown) => database as DatabaseAdapter<never, boolean>;

function postgresOnly(target: Target): Extract<Target, { kind: 'postgres' }> {
  if (target.kind !== 'postgres') throw new Error('postgres only');
  return target;
}

function sqliteOnly(target: Target): string {
  if (target.kind !== 'sqlite') throw new Error('sqlite only');
  return target.file;
}

/** The proxied URL without `options`, for the libraries that set the search path themselves. */
function plainUrl(url: string): string {
  const plain = new URL(url);
  plain.searchParams.delete('options');
  return plain.href;
}

/** A postgres.js client on the target's schema. */
function postgresJsClient(target: Target) {
  const { url, schema } = postgresOnly(target);
  return postgres(plainUrl(url), { max: 2, onnotice: () => undefined, connection: { search_path: schema } });
}

/** A synchronous transaction of better-sqlite3 (or of Drizzle on it). */
function synchronous<T>(run: (fn: (tx: T) => unknown) => unknown) {
  return async (fn: (tx: never) => unknown) => {
    run((tx) => {
      if (fn(tx as never) instanceof Promise) throw new Error('synchronous transactions only');
    });
  };
}

export const HARNESSES: Harness[] = [
  {
    name: 'pg',
    kind: 'postgres',
    async open(target) {
      const pool = new pg.Pool({ connectionString: postgresOnly(target).url, max: 2 });
      return {
        database: as(nodePostgres(pool)),
        transaction: (fn) => inPgTransaction(pool, fn),
        close: () => pool.end(),
      };
    },
  },
  {
    name: 'postgres.js',
    kind: 'postgres',
    async open(target) {
      const sql = postgresJsClient(target);
      return {
        database: as(postgresJs(sql)),
        transaction: async (fn) => void (await sql.begin((tx) => fn(tx as never) as Promise<unknown>)),
        close: () => sql.end({ timeout: 5 }),
      };
    },
  },
  {
    name: 'Kysely on Postgres',
    kind: 'postgres',
    async open(target) {
      const pool = new pg.Pool({ connectionString: postgresOnly(target).url, max: 2 });
      const db = new Kysely<Record<string, never>>({ dialect: new PostgresDialect({ pool }) });
      return {
        database: as(kysely(db)),
        transaction: (fn) => db.transaction().execute(async (trx) => void (await fn(trx as never))),
        close: () => db.destroy(),
      };
    },
  },
  {
    name: 'Kysely on SQLite',
    kind: 'sqlite',
    async open(target) {
      const db = new Kysely<Record<string, never>>({
        dialect: new SqliteDialect({ database: new Database(sqliteOnly(target)) }),
      });
      return {
        database: as(kysely(db)),
        transaction: (fn) => db.transaction().execute(async (trx) => void (await fn(trx as never))),
        close: () => db.destroy(),
      };
    },
  },
  {
    name: 'Drizzle on node-postgres',
    kind: 'postgres',
    async open(target) {
      const pool = new pg.Pool({ connectionString: postgresOnly(target).url, max: 2 });
      const db = drizzleNodePostgres(pool);
      return {
        database: as(drizzle(db)),
        transaction: (fn) => db.transaction(async (tx) => void (await fn(tx as never))),
        close: () => pool.end(),
      };
    },
  },
  {
    name: 'Drizzle on postgres.js',
    kind: 'postgres',
    async open(target) {
      const sql = postgresJsClient(target);
      const db = drizzlePostgresJs(sql);
      return {
        database: as(drizzle(db)),
        transaction: (fn) => db.transaction(async (tx) => void (await fn(tx as never))),
        close: () => sql.end({ timeout: 5 }),
      };
    },
  },
  {
    name: 'Drizzle on better-sqlite3',
    kind: 'sqlite',
    async open(target) {
      const client = new Database(sqliteOnly(target));
      const db = drizzleSqlite(client);
      return {
        database: as(drizzle(db)),
        transaction: synchronous((fn) => db.transaction((tx) => void fn(tx))),
        close: async () => void client.close(),
      };
    },
  },
  {
    name: 'Prisma',
    kind: 'postgres',
    async open(target) {
      const { PrismaClient } = await loadPrismaClient();
      const client = new PrismaClient({
        adapter: new PrismaPg({ connectionString: postgresOnly(target).url, max: 2 }),
      });
      return {
        database: as(prisma(client)),
        transaction: (fn) => client.$transaction(async (tx) => void (await fn(tx as never))),
        close: () => client.$disconnect(),
      };
    },
  },
  {
    name: 'Knex',
    kind: 'postgres',
    async open(target) {
      const db = createKnex({ client: 'pg', connection: postgresOnly(target).url, pool: { min: 0, max: 2 } });
      return {
        database: as(knex(db)),
        transaction: (fn) => db.transaction(async (trx) => void (await fn(trx as never))),
        close: () => db.destroy(),
      };
    },
  },
  {
    name: 'TypeORM',
    kind: 'postgres',
    async open(target) {
      const source = await new DataSource({
        type: 'postgres',
        url: postgresOnly(target).url,
        poolSize: 2,
      }).initialize();
      return {
        database: as(typeorm(source)),
        transaction: (fn) => source.transaction(async (manager) => void (await fn(manager as never))),
        close: () => source.destroy(),
      };
    },
  },
  {
    name: 'MikroORM',
    kind: 'postgres',
    inlinesValues: true,
    async open(target) {
      const { url, schema } = postgresOnly(target);
      const orm = await MikroORM.init({
        clientUrl: plainUrl(url),
        entities: [],
        discovery: { warnWhenNoEntities: false },
        pool: { min: 0, max: 2 },
        // MikroORM 7 hands driverOptions to pg's Pool.
        driverOptions: { options: `-c search_path=${schema}` },
      });
      return {
        database: as(mikroOrm(orm)),
        transaction: (fn) => orm.em.fork().transactional(async (em) => void (await fn(em as never))),
        close: () => orm.close(true),
      };
    },
  },
  {
    name: 'better-sqlite3',
    kind: 'sqlite',
    async open(target) {
      const db = new Database(sqliteOnly(target));
      return {
        database: as(betterSqlite3(db)),
        transaction: synchronous((fn) => db.transaction(() => void fn(db))()),
        close: async () => void db.close(),
      };
    },
  },
];
