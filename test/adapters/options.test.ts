/** The options every data-layer adapter shares, and what each factory refuses. No database needed. */
import { describe, expect, test } from 'vitest';
import { isOutboxerError, type DatabaseAdapter, type ListenHandlers } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { drizzle } from 'outboxer/drizzle';
import { knex, type KnexLike } from 'outboxer/knex';
import { kysely, type KyselyDatabase } from 'outboxer/kysely';
import { mikroOrm, type MikroOrmLike } from 'outboxer/mikro-orm';
import { nodePostgres } from 'outboxer/pg';
import { postgresJs, type PostgresJsSql } from 'outboxer/postgres-js';
import { prisma, type PrismaClientLike } from 'outboxer/prisma';
import { typeorm, type TypeOrmDataSource } from 'outboxer/typeorm';
import Database from 'better-sqlite3';
import { MssqlAdapter, MysqlAdapter, PostgresAdapter, SqliteAdapter } from 'kysely';

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    return isOutboxerError(error) ? `${error.code}: ${error.message}` : String(error);
  }
  return undefined;
}

/** A Kysely look-alike whose queries are recorded, never run. */
function fakeKysely(): KyselyDatabase & { ran: string[] } {
  const ran: string[] = [];
  const executor = {
    executeQuery: async (query: { sql: string }) => (ran.push(query.sql), { rows: [] }),
    transaction: () => ({ execute: <T>(fn: (trx: typeof executor) => Promise<T>) => fn(executor) }),
    connection: () => ({ execute: <T>(fn: (db: typeof executor) => Promise<T>) => fn(executor) }),
  };
  return { isTransaction: false, withoutPlugins: () => executor as never, ran };
}

function fakeRelayDatabase() {
  const calls: string[] = [];
  const database: DatabaseAdapter<never, false> = {
    ...nodePostgres({
      query: async () => ({ rows: [] }),
      connect: async () => ({ query: async () => ({ rows: [] }), release: () => undefined }),
    }),
    execute: async (query) => (calls.push(`execute ${query.text}`), []),
    executeAtomically: async (queries) => (calls.push(`atomically ${queries.length}`), queries.map(() => [])),
    listen: async (channel) => (calls.push(`listen ${channel}`), { close: async () => undefined }),
  };
  return { calls, database };
}

const handlers: ListenHandlers = { onNotification: () => undefined, onStatus: () => undefined };

describe('relayDatabase and notifications', () => {
  test('relayDatabase runs the relay side, LISTEN included; publishing stays on the library', async () => {
    const db = fakeKysely();
    const relay = fakeRelayDatabase();
    const adapter = kysely(db, { relayDatabase: relay.database });
    await adapter.execute({ text: 'SELECT 1', values: [] });
    await adapter.executeAtomically([{ text: 'SELECT 2', values: [] }]);
    await adapter.listen!('outboxer', handlers);
    await adapter.executeInTransaction(
      { isTransaction: true, withoutPlugins: () => db.withoutPlugins() },
      { text: 'INSERT', values: [] },
    );
    expect(relay.calls).toEqual(['execute SELECT 1', 'atomically 1', 'listen outboxer']);
    expect(db.ran).toEqual(['INSERT']);
  });

  test('notifications gives LISTEN to an adapter that has none', async () => {
    const relay = fakeRelayDatabase();
    expect(kysely(fakeKysely()).listen).toBeUndefined();
    const adapter = kysely(fakeKysely(), { notifications: relay.database });
    await adapter.listen!('outboxer', handlers);
    expect(relay.calls).toEqual(['listen outboxer']);
  });

  test('an unknown option is refused, naming it and the accepted ones', () => {
    expect(codeOf(() => kysely(fakeKysely(), { relayDb: {} } as never))).toMatch(
      /^INVALID_OPTIONS: Option "kysely.relayDb" must be one of relayDatabase, notifications, dialect/,
    );
  });

  test('relayDatabase must be an adapter of the same database', () => {
    expect(
      codeOf(() => kysely(fakeKysely(), { relayDatabase: betterSqlite3(new Database(':memory:')) as never })),
    ).toMatch(/^INVALID_OPTIONS: .*same database \(postgres\); got a sqlite adapter/);
    expect(codeOf(() => kysely(fakeKysely(), { relayDatabase: {} as never }))).toMatch(
      /^INVALID_OPTIONS: Option "kysely.relayDatabase"/,
    );
    expect(codeOf(() => kysely(fakeKysely(), { notifications: {} as never }))).toMatch(
      /^INVALID_OPTIONS: Option "kysely.notifications"/,
    );
  });
});

describe('factories', () => {
  test.each([
    ['postgresJs', () => postgresJs({} as PostgresJsSql)],
    ['kysely', () => kysely({} as KyselyDatabase)],
    ['drizzle', () => drizzle({} as never)],
    ['prisma', () => prisma({} as PrismaClientLike)],
    ['knex', () => knex({} as KnexLike)],
    ['typeorm', () => typeorm({} as TypeOrmDataSource)],
    ['mikroOrm', () => mikroOrm({} as MikroOrmLike)],
  ])('%s refuses what is not its library', (name, make) => {
    expect(codeOf(make)).toMatch(new RegExp(`^INVALID_OPTIONS: Option "${name}"`));
  });

  test('Postgres-only adapters refuse a library set up for another database', () => {
    const sqliteKnex = Object.assign(() => undefined, {
      raw: () => undefined,
      transaction: () => undefined,
      client: { dialect: 'sqlite3' },
    });
    expect(codeOf(() => knex(sqliteKnex as never))).toMatch(/^DATABASE_UNSUPPORTED: knex\(db\).*sqlite3/);
    // Knex's client "mysql" (the mysql package) is not the tested one: mysql2 is.
    const mysqlKnex = { ...sqliteKnex, client: { dialect: 'mysql', driverName: 'mysql' } };
    expect(codeOf(() => knex(mysqlKnex as never))).toMatch(
      /^DATABASE_UNSUPPORTED: knex\(db\).*client "mysql" \(use client "mysql2"\)/,
    );
    expect(
      codeOf(() =>
        typeorm({ createQueryRunner: () => undefined, options: { type: 'better-sqlite3' } } as never),
      ),
    ).toMatch(/^DATABASE_UNSUPPORTED: typeorm\(dataSource\)/);
    expect(
      codeOf(() =>
        prisma({
          $queryRawUnsafe: () => undefined,
          $transaction: () => undefined,
          _activeProvider: 'sqlite',
        } as never),
      ),
    ).toMatch(/^DATABASE_UNSUPPORTED: prisma\(client\)/);
  });

  test('kysely picks the dialect from the option, or from the Kysely dialect adapter', () => {
    expect(kysely(fakeKysely(), { dialect: 'sqlite' }).dialect.name).toBe('sqlite');
    expect(kysely(fakeKysely()).dialect.name).toBe('postgres');
    expect(kysely(fakeKysely(), { dialect: 'mysql' }).dialect.name).toBe('mysql');
    const on = (adapter: object) => Object.assign(fakeKysely(), { getExecutor: () => ({ adapter }) });
    expect(kysely(on(new SqliteAdapter())).dialect.name).toBe('sqlite');
    expect(kysely(on(new MysqlAdapter())).dialect.name).toBe('mysql');
    expect(kysely(on(new PostgresAdapter())).dialect.name).toBe('postgres');
    // A third-party dialect whose adapter extends Kysely's own talks to that database.
    class CockroachAdapter extends PostgresAdapter {}
    expect(kysely(on(new CockroachAdapter())).dialect.name).toBe('postgres');
    expect(codeOf(() => kysely(fakeKysely(), { dialect: 'mssql' as never }))).toMatch(
      /^INVALID_OPTIONS: Option "kysely.dialect" must be "postgres", "mysql" or "sqlite"/,
    );
  });

  test('kysely refuses a database outboxer has no dialect for, naming it', () => {
    expect(
      codeOf(() =>
        kysely(Object.assign(fakeKysely(), { getExecutor: () => ({ adapter: new MssqlAdapter() }) })),
      ),
    ).toMatch(
      /^DATABASE_UNSUPPORTED: kysely\(db\): the Kysely instance's dialect adapter is MssqlAdapter;.*dialect: 'postgres' \| 'mysql' \| 'sqlite'/,
    );
  });
});
