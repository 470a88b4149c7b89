/**
 * Compile-time checks, run by `tsc --noEmit -p .` (this file is never executed): each adapter's
 * `publish` takes the library's own transaction type, and the root object of the library (a pool,
 * a database, a client) is a type error where the library's types can tell them apart. Each
 * `@ts-expect-error` fails the typecheck if the line below it ever compiles.
 */
import type { EntityManager as CoreEntityManager } from '@mikro-orm/core';
import type { EntityManager as MariaDbEntityManager, MikroORM as MariaDbMikroORM } from '@mikro-orm/mariadb';
import type { EntityManager as MySqlEntityManager, MikroORM as MySqlMikroORM } from '@mikro-orm/mysql';
import type { EntityManager as PostgresEntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { ITXClientDenyList, getPrismaClient } from '@prisma/client/runtime/client';
import type { BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import type { MySql2Database } from 'drizzle-orm/mysql2';
import type { NodePgDatabase } from 'drizzle-orm/node-postgres';
import type { PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import type { Knex } from 'knex';
import type { ControlledTransaction, Kysely, Transaction } from 'kysely';
import type { Pool as MysqlCallbackPool } from 'mysql2';
import type { Pool as MysqlPool } from 'mysql2/promise';
import type pg from 'pg';
import type { DatabaseSync } from 'node:sqlite';
import type postgres from 'postgres';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { expectTypeOf } from 'expect-type';
import { Outboxer, functionRelay } from 'outboxer';
import { drizzle } from 'outboxer/drizzle';
import { knex } from 'outboxer/knex';
import { kysely } from 'outboxer/kysely';
import { mikroOrm } from 'outboxer/mikro-orm';
import { nodeSqlite } from 'outboxer/node-sqlite';
import { nodePostgres, type PgTransactionClient } from 'outboxer/pg';
import { postgresJs } from 'outboxer/postgres-js';
import { prisma } from 'outboxer/prisma';
import { typeorm } from 'outboxer/typeorm';

const outboxes = { orders: { relay: functionRelay(async () => undefined) } };

export async function postgresJsTypes(sql: postgres.Sql, tx: postgres.TransactionSql) {
  const outboxer = new Outboxer({ database: postgresJs(sql), outboxes });
  expectTypeOf(outboxer.publish(tx, 'orders', {})).toEqualTypeOf<Promise<number>>();
  await sql.begin(async (t) => outboxer.publish(t, 'orders', {}));
  // @ts-expect-error the root sql is not a transaction: publish with the sql of sql.begin()
  await outboxer.publish(sql, 'orders', {});
  // @ts-expect-error a transaction is not what postgresJs() takes: it needs the root sql
  postgresJs(tx);
}

export async function kyselyTypes(
  db: Kysely<{ orders: { id: number } }>,
  trx: Transaction<{ orders: { id: number } }>,
) {
  const outboxer = new Outboxer({ database: kysely(db), outboxes });
  expectTypeOf(outboxer.publish(trx, 'orders', {})).toEqualTypeOf<Promise<number>>();
  await db.transaction().execute(async (t) => outboxer.publish(t, 'orders', {}));
  const controlled: ControlledTransaction<{ orders: { id: number } }> = await db.startTransaction().execute();
  await outboxer.publish(controlled, 'orders', {});
  // @ts-expect-error a Kysely instance is not a Transaction (its isTransaction is boolean, not true)
  await outboxer.publish(db, 'orders', {});
}

export async function drizzleTypes(
  pgDb: NodePgDatabase & { $client: pg.Pool },
  jsDb: PostgresJsDatabase & { $client: postgres.Sql },
  sqliteDb: BetterSQLite3Database & { $client: import('better-sqlite3').Database },
  mysqlDb: MySql2Database & { $client: MysqlCallbackPool },
  mysqlPromiseDb: MySql2Database & { $client: MysqlPool },
) {
  const onPostgres = new Outboxer({ database: drizzle(pgDb), outboxes });
  const pgTx = null as unknown as Parameters<Parameters<typeof pgDb.transaction>[0]>[0];
  expectTypeOf(onPostgres.publish(pgTx, 'orders', {})).toEqualTypeOf<Promise<number>>();
  await pgDb.transaction(async (tx) => onPostgres.publish(tx, 'orders', {}));
  // @ts-expect-error the Drizzle database is not a transaction (it has no rollback())
  await onPostgres.publish(pgDb, 'orders', {});

  const onPostgresJs = new Outboxer({ database: drizzle(jsDb), outboxes });
  await jsDb.transaction(async (tx) => onPostgresJs.publish(tx, 'orders', {}));

  const onMysql = new Outboxer({ database: drizzle(mysqlDb), outboxes });
  await mysqlDb.transaction(async (tx) => {
    expectTypeOf(onMysql.publish(tx, 'orders', {})).toEqualTypeOf<Promise<number>>();
  });
  // @ts-expect-error the Drizzle MySQL database is not a transaction (it has no rollback())
  await onMysql.publish(mysqlDb, 'orders', {});
  const onMysqlPromisePool = new Outboxer({ database: drizzle(mysqlPromiseDb), outboxes });
  await mysqlPromiseDb.transaction(async (tx) => onMysqlPromisePool.publish(tx, 'orders', {}));

  const onSqlite = new Outboxer({ database: drizzle(sqliteDb), outboxes });
  // Synchronous: the id itself, not a promise, inside a synchronous transaction.
  const id = sqliteDb.transaction((tx) => onSqlite.publish(tx, 'orders', {}));
  expectTypeOf(id).toEqualTypeOf<number>();
  // @ts-expect-error the Drizzle SQLite database is not a transaction
  onSqlite.publish(sqliteDb, 'orders', {});
  // @ts-expect-error a SQLite transaction does not belong to a Postgres outboxer
  sqliteDb.transaction((tx) => onPostgres.publish(tx, 'orders', {}));
  // @ts-expect-error nor to a MySQL one
  sqliteDb.transaction((tx) => onMysql.publish(tx, 'orders', {}));
  // @ts-expect-error a MySQL transaction does not belong to a SQLite outboxer
  await mysqlDb.transaction(async (tx) => onSqlite.publish(tx, 'orders', {}));
}

export function nodeSqliteTypes(db: DatabaseSync) {
  // node:sqlite's own DatabaseSync is what nodeSqlite() takes, and publish is synchronous on it.
  const outboxer = new Outboxer({ database: nodeSqlite(db), outboxes });
  expectTypeOf(outboxer.publish(db, 'orders', {})).toEqualTypeOf<number>();
  // @ts-expect-error a publish on SQLite returns the id: no promise to await inside BEGIN … COMMIT
  expectTypeOf(outboxer.publish(db, 'orders', {})).toEqualTypeOf<Promise<number>>();
}

type RuntimePrismaClient = InstanceType<ReturnType<typeof getPrismaClient>>;

/** The generated client's `$transaction` passes `Omit<PrismaClient, ITXClientDenyList>`, as here. */
export async function prismaTypes(
  client: RuntimePrismaClient,
  tx: Omit<RuntimePrismaClient, ITXClientDenyList>,
) {
  const outboxer = new Outboxer({ database: prisma(client), outboxes });
  expectTypeOf(outboxer.publish(tx, 'orders', {})).toEqualTypeOf<Promise<number>>();
  // @ts-expect-error the PrismaClient is not an interactive transaction (it has $connect)
  await outboxer.publish(client, 'orders', {});
  prisma(client, { dialect: 'mysql' });
  // @ts-expect-error Prisma runs on Postgres and MySQL/MariaDB only
  prisma(client, { dialect: 'sqlite' });
}

export async function knexTypes(db: Knex, trx: Knex.Transaction) {
  const outboxer = new Outboxer({ database: knex(db), outboxes });
  expectTypeOf(outboxer.publish(trx, 'orders', {})).toEqualTypeOf<Promise<number>>();
  await db.transaction(async (t) => outboxer.publish(t, 'orders', {}));
  // @ts-expect-error a Knex instance is not a Knex.Transaction (it has no isCompleted())
  await outboxer.publish(db, 'orders', {});
}

export async function typeormTypes(dataSource: DataSource, manager: EntityManager, runner: QueryRunner) {
  const outboxer = new Outboxer({ database: typeorm(dataSource), outboxes });
  expectTypeOf(outboxer.publish(manager, 'orders', {})).toEqualTypeOf<Promise<number>>();
  await dataSource.transaction(async (m) => outboxer.publish(m, 'orders', {}));
  await outboxer.publish(runner, 'orders', {});
  // @ts-expect-error a DataSource is not a transaction's EntityManager
  await outboxer.publish(dataSource, 'orders', {});
  // dataSource.manager has the type of a transaction's manager: refused at run time instead.
  await outboxer.publish(dataSource.manager, 'orders', {});
  typeorm(dataSource, { dialect: 'mysql' });
  // @ts-expect-error TypeORM runs on Postgres and MySQL/MariaDB only
  typeorm(dataSource, { dialect: 'sqlite' });
}

export async function mikroOrmTypes(orm: MikroORM, em: PostgresEntityManager, coreEm: CoreEntityManager) {
  const outboxer = new Outboxer({ database: mikroOrm(orm), outboxes });
  expectTypeOf(outboxer.publish(em, 'orders', {})).toEqualTypeOf<Promise<number>>();
  await orm.em.fork().transactional(async (e) => outboxer.publish(e, 'orders', {}));
  await outboxer.publish(coreEm, 'orders', {});
  // @ts-expect-error the MikroORM instance is not an EntityManager
  await outboxer.publish(orm, 'orders', {});
}

export async function mikroOrmMysqlTypes(
  orm: MySqlMikroORM,
  em: MySqlEntityManager,
  maria: MariaDbMikroORM,
  mariaEm: MariaDbEntityManager,
) {
  const outboxer = new Outboxer({ database: mikroOrm(orm), outboxes });
  expectTypeOf(outboxer.publish(em, 'orders', {})).toEqualTypeOf<Promise<number>>();
  await orm.em.fork().transactional(async (e) => outboxer.publish(e, 'orders', {}));
  // @ts-expect-error the MikroORM instance is not an EntityManager
  await outboxer.publish(orm, 'orders', {});
  const onMariaDb = new Outboxer({ database: mikroOrm(maria, { dialect: 'mysql' }), outboxes });
  await onMariaDb.publish(mariaEm, 'orders', {});
  // @ts-expect-error SQLite is not a dialect of the MikroORM adapter
  mikroOrm(maria, { dialect: 'sqlite' });
}

export async function pgTypes(pool: pg.Pool, client: pg.PoolClient) {
  const outboxer = new Outboxer({ database: nodePostgres(pool), outboxes });
  expectTypeOf(outboxer.publish(client, 'orders', {})).toEqualTypeOf<Promise<number>>();
  // @ts-expect-error a pg Pool is not the client of a transaction
  await outboxer.publish(pool, 'orders', {});
  // @ts-expect-error nor for publishMany
  await outboxer.publishMany(pool, [{ outbox: 'orders', payload: {} }]);
  // tsc names the type of PgTransactionClient's totalCount when it refuses a Pool: it says what to pass.
  type PoolGuidance = NonNullable<PgTransactionClient['totalCount']>;
  expectTypeOf<PoolGuidance>().not.toBeNever();
  expectTypeOf<PoolGuidance>().toExtend<`pg.Pool is not a transaction: ${string}pool.connect()${string}BEGIN${string}`>();
}
