/**
 * What the MikroORM adapter does beyond the behaviour suite: the dialect it picks from the ORM's
 * platform or its option, what it refuses, and question marks that are not placeholders, which
 * MikroORM would read as placeholders, reaching Postgres and MariaDB as written. Real ORMs, on the
 * real servers; skipped, with the reason, on a Node older than MikroORM's floor.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay, isOutboxerError, type SqlQuery } from 'outboxer';
import { mikroOrm, type MikroOrmLike } from 'outboxer/mikro-orm';
import { nodePostgres } from 'outboxer/pg';
import { DATABASE_URL, MARIADB_URL } from '../support/databases.js';
import { mikroOrmMissing } from '../support/mikro-orm.js';
import type { HarnessOrm } from './mikro-orm-harness.js';

/** A MikroORM instance, as the adapter and the harness see it. */
type Orm = MikroOrmLike & HarnessOrm;

const options = { entities: [], discovery: { warnWhenNoEntities: false }, pool: { min: 0, max: 2 } };

/** The three drivers, each constructed (it connects at its first statement). */
const drivers: Record<string, () => Promise<Orm>> = {
  '@mikro-orm/postgresql': async () => {
    const { MikroORM } = await import('@mikro-orm/postgresql');
    return new MikroORM({ ...options, clientUrl: DATABASE_URL }) as unknown as Orm;
  },
  '@mikro-orm/mysql': async () => {
    const { MikroORM } = await import('@mikro-orm/mysql');
    return new MikroORM({ ...options, clientUrl: MARIADB_URL }) as unknown as Orm;
  },
  '@mikro-orm/mariadb': async () => {
    const { MikroORM } = await import('@mikro-orm/mariadb');
    return new MikroORM({ ...options, clientUrl: MARIADB_URL }) as unknown as Orm;
  },
};

function failure(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    return isOutboxerError(error) ? `${error.code}: ${error.message}` : String(error);
  }
  return 'no error';
}

async function rejection(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    return isOutboxerError(error) ? `${error.code}: ${error.message}` : String(error);
  }
  return 'no error';
}

if (mikroOrmMissing !== undefined) {
  test.skip(`MikroORM adapter specifics: ${mikroOrmMissing}`, () => undefined);
} else {
  const orms: Record<string, Orm> = {};
  beforeAll(async () => {
    for (const [name, make] of Object.entries(drivers)) orms[name] = await make();
  });
  afterAll(async () => {
    for (const orm of Object.values(orms)) await orm.close(true);
  });

  describe('the dialect', () => {
    test('comes from the platform: Postgres for @mikro-orm/postgresql, MySQL for @mikro-orm/mysql and @mikro-orm/mariadb', () => {
      expect(mikroOrm(orms['@mikro-orm/postgresql']!).dialect.name).toBe('postgres');
      expect(mikroOrm(orms['@mikro-orm/mysql']!).dialect.name).toBe('mysql');
      expect(mikroOrm(orms['@mikro-orm/mariadb']!).dialect.name).toBe('mysql');
    });

    test('the dialect option wins over the platform; anything but postgres or mysql is refused', () => {
      expect(mikroOrm(orms['@mikro-orm/mysql']!, { dialect: 'postgres' }).dialect.name).toBe('postgres');
      expect(failure(() => mikroOrm(orms['@mikro-orm/mysql']!, { dialect: 'sqlite' as never }))).toMatch(
        /^INVALID_OPTIONS: Option "mikroOrm.dialect" must be "postgres" or "mysql"; got "sqlite"/,
      );
      expect(failure(() => mikroOrm(orms['@mikro-orm/mysql']!, { dialects: 'mysql' } as never))).toMatch(
        /^INVALID_OPTIONS: Option "mikroOrm.dialects" must be one of relayDatabase, notifications, dialect/,
      );
    });

    test('a dialect that is not the driver’s fails at the first statement, naming the pool it found', async () => {
      const outboxer = new Outboxer({
        database: mikroOrm(orms['@mikro-orm/mysql']!, { dialect: 'postgres' }),
        outboxes: { events: { relay: functionRelay(async () => undefined) } },
      });
      expect(await rejection(outboxer.migrate())).toMatch(
        /^DATABASE_UNSUPPORTED: mikroOrm\(orm\): the ORM's driver pool \(Pool\) is not pg's/,
      );
    });

    test('a platform outboxer has no dialect for is refused, and the option named', () => {
      class SqlitePlatform {}
      const onSqlite = {
        em: {
          getConnection: () => ({ getNativeClient: async () => ({}) }),
          getPlatform: () => new SqlitePlatform(),
        },
      };
      expect(failure(() => mikroOrm(onSqlite))).toMatch(
        /^DATABASE_UNSUPPORTED: mikroOrm\(orm\): .* this ORM uses SqlitePlatform\. .*\{ dialect: 'mysql' \}/,
      );
    });

    test('an ORM whose connection has no driver pool (MikroORM 6) is refused', () => {
      const v6 = { em: { getConnection: () => ({ getKnex: () => ({}) }), getPlatform: () => ({}) } };
      expect(failure(() => mikroOrm(v6 as never))).toMatch(
        /^INVALID_OPTIONS: Option "mikroOrm" must be a MikroORM 7/,
      );
    });

    test('relayDatabase must be on the same database as the ORM', () => {
      const pgAdapter = nodePostgres({
        query: async () => ({ rows: [] }),
        connect: async () => ({}) as never,
      });
      expect(failure(() => mikroOrm(orms['@mikro-orm/mariadb']!, { relayDatabase: pgAdapter }))).toMatch(
        /^INVALID_OPTIONS: Option "mikroOrm.relayDatabase" must be an adapter of the same database \(mysql\)/,
      );
    });
  });

  // Each `?` that is not a placeholder, in a string, a quoted identifier and a comment: MikroORM
  // reads every `?` as a placeholder unless escaped, and leaves `\?` alone in a statement without
  // values. Both forms must reach the server as written.
  const statements: Record<string, { withValues: SqlQuery; without: SqlQuery }> = {
    postgres: {
      withValues: {
        text: `SELECT 'why? ??' AS q, $1::text AS v, $2::int AS n, "?"::text AS i /* ? */ FROM (SELECT 'x' AS "?") AS t`,
        values: ['it’s a ?', 7],
      },
      without: { text: `SELECT 'why? ??' AS q /* ? */`, values: [] },
    },
    mysql: {
      withValues: {
        text: "SELECT 'why? \\\\?' AS q, ? AS v, ? AS n, `?` AS i /* ? */ FROM (SELECT 'x' AS `?`) AS t -- ?\n",
        values: ['it’s a ?', 7],
      },
      without: { text: "SELECT 'why? ??' AS q # ?\n", values: [] },
    },
  };

  describe.each(Object.keys(drivers))('question marks that are not placeholders, %s', (driver) => {
    test('reach the server as written, with values and without', async () => {
      const orm = orms[driver]!;
      const adapter = mikroOrm(orm);
      const { withValues, without } = statements[adapter.dialect.name]!;
      const [first, second] = await orm.em
        .fork()
        .transactional(async (em) => [
          await adapter.executeInTransaction(em, withValues),
          await adapter.executeInTransaction(em, without),
        ]);
      const q = adapter.dialect.name === 'mysql' ? 'why? \\?' : 'why? ??';
      expect(first).toEqual([{ q, v: 'it’s a ?', n: 7, i: 'x' }]);
      expect(second).toEqual([{ q: 'why? ??' }]);
    });
  });
}
