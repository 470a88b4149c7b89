/**
 * The exported DDL, `postgresSchemaSql` and `sqliteSchemaSql` (re-exported by every adapter that
 * speaks the dialect): hostile `schema` and `table` throw INVALID_IDENTIFIER instead of printing
 * DDL, and for plain names the printed script names nothing but our own objects, runs on a real
 * Postgres and a real SQLite file as the one statement sent, and leaves the canary alone.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer } from 'outboxer';
import * as betterSqlite3Exports from 'outboxer/better-sqlite3';
import * as drizzleExports from 'outboxer/drizzle';
import * as knexExports from 'outboxer/knex';
import * as kyselyExports from 'outboxer/kysely';
import * as mikroOrmExports from 'outboxer/mikro-orm';
import * as pgExports from 'outboxer/pg';
import * as postgresJsExports from 'outboxer/postgres-js';
import * as prismaExports from 'outboxer/prisma';
import * as typeormExports from 'outboxer/typeorm';
import {
  BIGINT_NAME,
  CANARY,
  expectRefusal,
  hostileIdentifiers,
  postgresScratch,
  sqliteScratch,
  type PostgresScratch,
  type SqliteScratch,
  inPgTransaction,
} from './support.js';

const { postgresSchemaSql } = pgExports;
const { sqliteSchemaSql } = betterSqlite3Exports;
type SchemaSql = (options?: { table?: string; schema?: string }) => string;

const generators: Array<[string, SchemaSql]> = [
  ['postgresSchemaSql', postgresSchemaSql],
  ['sqliteSchemaSql', sqliteSchemaSql],
];

test('every adapter exports the same two functions, so checking these two checks them all', () => {
  for (const exports of [postgresJsExports, kyselyExports, drizzleExports, prismaExports, knexExports])
    expect(exports.postgresSchemaSql).toBe(postgresSchemaSql);
  for (const exports of [typeormExports, mikroOrmExports])
    expect(exports.postgresSchemaSql).toBe(postgresSchemaSql);
  for (const exports of [kyselyExports, drizzleExports])
    expect(exports.sqliteSchemaSql).toBe(sqliteSchemaSql);
});

describe.each(generators)('%s refuses hostile names', (_name, schemaSql) => {
  const refuse = (options: Record<string, unknown>, what: string) =>
    expectRefusal(() => schemaSql(options as never), ['INVALID_IDENTIFIER'], what);

  test.each(hostileIdentifiers())('schema: %s', async (label, value) => {
    await refuse({ schema: value }, `schema ${label}`);
    await refuse({ schema: value, table: 'msgs' }, `schema ${label}, table msgs`);
    // The default schema is checked even when the table brings its own.
    await refuse({ schema: value, table: 'app.msgs' }, `schema ${label}, table app.msgs`);
  });

  test.each(hostileIdentifiers())('table: %s', async (label, value) => {
    // `table: null` is the default table, as `undefined` is.
    if (value !== null) {
      await refuse({ table: value }, `table ${label}`);
      await refuse({ table: value, schema: 'app' }, `table ${label}, schema app`);
    }
    if (typeof value === 'string') {
      for (const table of [`${value}.msgs`, `app.${value}`]) await refuse({ table }, `table ${table}`);
    }
  });

  test('names too long for their companions (table over 48, schema over 63 characters)', async () => {
    await refuse({ table: 'm'.repeat(49) }, '49-character table');
    await refuse({ schema: 's'.repeat(64) }, '64-character schema');
    await refuse({ table: `${'s'.repeat(64)}.m` }, '64-character schema in the table');
    expect(schemaSql({ schema: 's'.repeat(63), table: 'm'.repeat(48) })).toContain(`"${'m'.repeat(48)}_`);
  });

  test('a bigint name is refused with INVALID_IDENTIFIER, its message showing 1n', async () => {
    expect((await refuse({ schema: BIGINT_NAME }, 'schema 1n')).message).toContain('1n');
    expect((await refuse({ table: BIGINT_NAME }, 'table 1n')).message).toContain('1n');
  });
});

/** Every double-quoted identifier of a script, which must all be ours. */
function quotedNames(ddl: string): Set<string> {
  return new Set([...ddl.matchAll(/"([^"]*)"/g)].map((match) => match[1]!));
}

function expectOnlyOurNames(ddl: string, schema: string, table: string): void {
  expect(ddl).not.toMatch(/victim/i);
  for (const name of quotedNames(ddl)) {
    expect(name === schema || name === table || name.startsWith(`${table}_`), name).toBe(true);
  }
}

describe('the printed DDL, on a real Postgres', () => {
  let scratch: PostgresScratch;
  let pool: pg.Pool;

  beforeAll(async () => {
    scratch = await postgresScratch();
    pool = new pg.Pool({ connectionString: scratch.url, max: 1 });
  });
  afterAll(async () => {
    await pool.end();
    await scratch.close();
  });

  test.each([
    ['schema and table', (s: string) => ({ schema: s, table: 'ddl_one' }), 'ddl_one'],
    ['schema.table', (s: string) => ({ table: `${s}.ddl_two` }), 'ddl_two'],
    ['the search path', () => ({ table: 'ddl_three' }), 'ddl_three'],
    ['the longest names', (s: string) => ({ schema: s, table: 'd'.repeat(48) }), 'd'.repeat(48)],
  ])(
    'named by %s: runs as the one statement sent, twice, and creates only its own objects',
    async (_how, options, table) => {
      const ddl = postgresSchemaSql(options(scratch.schema));
      expectOnlyOurNames(ddl, scratch.schema, table);
      const before = await scratch.snapshot();
      const from = scratch.wire.statements.length;
      await pool.query(ddl);
      await pool.query(ddl); // idempotent
      expect(scratch.wire.statements.slice(from)).toEqual([
        { text: ddl, values: [] },
        { text: ddl, values: [] },
      ]);
      const after = await scratch.snapshot();
      expect(after.victim).toEqual(CANARY);
      const added = after.relations.filter((r) => !before.relations.some((b) => b.relname === r.relname));
      expect(added.length).toBeGreaterThan(5);
      for (const { relname } of added)
        expect(relname === table || relname.startsWith(`${table}_`), relname).toBe(true);
      for (const old of before.relations) expect(after.relations).toContainEqual(old);

      // The tables are the real thing: an instance publishes to them and reads the message back.
      const outboxer = new Outboxer({
        database: pgExports.nodePostgres(pool),
        relay: false,
        outboxes: { orders: { table: `${scratch.schema}.${table}` } },
      });
      await inPgTransaction(pool, (client) =>
        outboxer.publish(client, 'orders', { sql: "'); DROP TABLE victim; --" }, { groupKey: 'g' }),
      );
      expect((await outboxer.listPending('orders')).map((m) => m.payload)).toEqual([
        { sql: "'); DROP TABLE victim; --" },
      ]);
      expect(await scratch.canary()).toEqual(CANARY);
    },
  );
});

describe('the printed DDL, on a real SQLite file', () => {
  let scratch: SqliteScratch;
  let db: Database.Database;

  beforeAll(() => {
    scratch = sqliteScratch();
    db = new Database(scratch.file);
  });
  afterAll(() => {
    db.close();
    scratch.close();
  });

  test.each([
    ['a table', { table: 'ddl_one' }, 'ddl_one'],
    ['main.table', { table: 'main.ddl_two' }, 'ddl_two'],
    ['schema main and a table', { schema: 'main', table: 'ddl_three' }, 'ddl_three'],
    ['the longest name', { table: 'd'.repeat(48) }, 'd'.repeat(48)],
  ])(
    'named by %s: runs as the one script sent, twice, and creates only its own objects',
    (_how, options, table) => {
      const ddl = sqliteSchemaSql(options);
      expectOnlyOurNames(ddl, 'main', table);
      const before = scratch.snapshot();
      const from = scratch.statements().length;
      db.exec(ddl);
      db.exec(ddl);
      expect(scratch.statements().slice(from)).toEqual([
        { file: scratch.file, text: ddl, values: [] },
        { file: scratch.file, text: ddl, values: [] },
      ]);
      const after = scratch.snapshot();
      expect(after.victim).toEqual(CANARY);
      const names = (rows: unknown[]) => rows.map((row) => (row as [string])[0]);
      const added = names(after.relations).filter((name) => !names(before.relations).includes(name));
      for (const name of added)
        expect(
          name === table ||
            [`${table}_`, `sqlite_autoindex_${table}_`].some((p) => name.startsWith(p)) ||
            name === 'sqlite_sequence',
          name,
        ).toBe(true);
      expect(added).toContain(`${table}_config`);

      const outboxer = new Outboxer({
        database: betterSqlite3Exports.betterSqlite3(db),
        relay: false,
        outboxes: { orders: { table } },
      });
      db.transaction(() => outboxer.publish(db, 'orders', { sql: "'); DROP TABLE victim; --" }))();
      expect(scratch.canary()).toEqual(CANARY);
    },
  );
});
