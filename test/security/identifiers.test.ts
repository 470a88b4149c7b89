/**
 * `new Outboxer({...})` with hostile names wherever the options take one: the instance's `schema`
 * and `name`, an outbox's `table` (as `name` and as `schema.name`) and the outbox's own name. Each
 * is refused at construction with INVALID_IDENTIFIER (or INVALID_OPTIONS), and nothing reaches the
 * database: the adapter is never called, the proxy in front of Postgres never sees a connection.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, type DatabaseAdapter, type OutboxOptions } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { nodePostgres } from 'outboxer/pg';
import {
  BIGINT_NAME,
  CANARY,
  expectRefusal,
  hostileIdentifiers,
  postgresScratch,
  sqliteScratch,
  type PostgresScratch,
  type SqliteScratch,
} from './support.js';

const REFUSED = ['INVALID_IDENTIFIER', 'INVALID_OPTIONS'] as const;

/** The adapter, with every call to it counted. */
function counting(adapter: DatabaseAdapter): { adapter: DatabaseAdapter; calls: string[] } {
  const calls: string[] = [];
  const wrapped: DatabaseAdapter = {
    ...adapter,
    executeInTransaction: (tx, query) => (calls.push(query.text), adapter.executeInTransaction(tx, query)),
    execute: (query) => (calls.push(query.text), adapter.execute(query)),
    executeAtomically: (queries) => (
      calls.push(...queries.map((q) => q.text)),
      adapter.executeAtomically(queries)
    ),
    listen: (channel, handlers) => (calls.push(`LISTEN ${channel}`), adapter.listen!(channel, handlers)),
  };
  return { adapter: wrapped, calls };
}

/** Strings the outbox-name rule (`[A-Za-z0-9_.-]{1,100}`) lets through: names, harmless as values. */
const PLAIN_OUTBOX_NAME = /^[A-Za-z0-9_.-]{1,100}$/;

describe.each(['Postgres', 'SQLite'])('new Outboxer on %s refuses hostile names', (name) => {
  let postgres: PostgresScratch | undefined;
  let sqlite: SqliteScratch | undefined;
  let pool: pg.Pool | undefined;
  let db: Database.Database | undefined;
  let database: DatabaseAdapter;
  let calls: string[];
  let schema: string;
  let before: unknown;

  beforeAll(async () => {
    if (name === 'Postgres') {
      postgres = await postgresScratch();
      pool = new pg.Pool({ connectionString: postgres.url, max: 2 });
      ({ adapter: database, calls } = counting(nodePostgres(pool) as DatabaseAdapter));
      schema = postgres.schema;
      before = await postgres.snapshot();
    } else {
      sqlite = sqliteScratch();
      db = new Database(sqlite.file);
      ({ adapter: database, calls } = counting(betterSqlite3(db) as DatabaseAdapter));
      schema = 'main';
      before = sqlite.snapshot();
    }
  });

  afterAll(async () => {
    // Nothing was ever sent: no call of the adapter, no connection, no statement; the canary stays.
    let seen: unknown;
    try {
      seen =
        postgres !== undefined
          ? {
              connections: postgres.wire.connections(),
              statements: postgres.wire.statements,
              after: await postgres.snapshot(),
            }
          : { connections: 0, statements: sqlite!.statements(), after: sqlite!.snapshot() };
    } finally {
      await pool?.end();
      await postgres?.close();
      db?.close();
      sqlite?.close();
    }
    expect(calls).toEqual([]);
    expect(seen).toEqual({ connections: 0, statements: [], after: before });
  });

  const make = (options: Record<string, unknown>, outboxes: Record<string, OutboxOptions>) => () =>
    new Outboxer({ database, relay: false, outboxes, ...options });

  test.each(hostileIdentifiers())('schema: %s', async (label, value) => {
    await expectRefusal(make({ schema: value }, { orders: {} }), REFUSED, `schema ${label}`);
    // Also when the table names its own schema: the default schema is checked all the same.
    await expectRefusal(
      make({ schema: value }, { orders: { table: `${schema}.msgs` } }),
      REFUSED,
      `schema ${label} with a qualified table`,
    );
  });

  test.each(hostileIdentifiers())('outboxes.<name>.table: %s', async (label, value) => {
    // `table: null` means the default table, as `undefined` does: not a name at all.
    if (value !== null) {
      await expectRefusal(make({}, { orders: { table: value as string } }), REFUSED, `table ${label}`);
      await expectRefusal(
        make({ schema }, { orders: { table: value as string } }),
        REFUSED,
        `table ${label} with a schema`,
      );
    }
    if (typeof value === 'string') {
      for (const table of [`${value}.msgs`, `${schema}.${value}`, `${value}.${value}`]) {
        await expectRefusal(make({}, { orders: { table } }), REFUSED, `table ${JSON.stringify(table)}`);
      }
    }
  });

  test('outboxes.<name>.table: a name over 48 characters, which the companion tables would stretch past 63', async () => {
    await expectRefusal(make({}, { orders: { table: 'm'.repeat(49) } }), REFUSED, '49 characters');
    await expectRefusal(make({}, { orders: { table: `s.${'m'.repeat(49)}` } }), REFUSED, 's.49 characters');
    await expectRefusal(
      make({}, { orders: { table: `${'s'.repeat(64)}.m` } }),
      REFUSED,
      '64-character schema',
    );
    // The longest accepted names build an instance (and still nothing runs).
    make({ schema: 's'.repeat(63) }, { orders: { table: 'm'.repeat(48) } })();
  });

  test.each(hostileIdentifiers().filter(([, v]) => typeof v === 'string' && !PLAIN_OUTBOX_NAME.test(v)))(
    'the outbox name: %s',
    async (label, value) => {
      await expectRefusal(make({}, { [value as string]: {} }), REFUSED, `outbox ${label}`);
      await expectRefusal(make({}, { orders: {}, [value as string]: {} }), REFUSED, `second outbox ${label}`);
    },
  );

  test('the outbox name: over 100 characters', async () => {
    await expectRefusal(make({}, { ['o'.repeat(101)]: {} }), REFUSED, '101 characters');
  });

  test.each(
    hostileIdentifiers().filter(([, v]) => typeof v !== 'string' || !/^[A-Za-z0-9_.-]{1,63}$/.test(v)),
  )('the instance name: %s', async (label, value) => {
    await expectRefusal(make({ name: value }, { orders: {} }), REFUSED, `name ${label}`);
  });

  test('a bigint schema, table or instance name is refused with INVALID_IDENTIFIER, its message showing 1n', async () => {
    for (const [what, fn] of [
      ['schema 1n', make({ schema: BIGINT_NAME }, { orders: {} })],
      ['table 1n', make({}, { orders: { table: BIGINT_NAME as never } })],
      ['name 1n', make({ name: BIGINT_NAME }, { orders: {} })],
    ] as const)
      expect((await expectRefusal(fn, REFUSED, what)).message, what).toContain('1n');
  });

  test('options that are not objects where names live', async () => {
    for (const outboxes of ['x"; DROP TABLE victim; --', ['victim'], null, 42, {}]) {
      await expectRefusal(make({}, outboxes as never), REFUSED, `outboxes ${JSON.stringify(outboxes)}`);
    }
    for (const options of ['x"; DROP TABLE victim; --', 1, true]) {
      await expectRefusal(
        make({}, { orders: options as never }),
        REFUSED,
        `outbox options ${String(options)}`,
      );
    }
    await expectRefusal(
      make({ 'schema"; DROP TABLE victim; --': 'x' }, { orders: {} }),
      REFUSED,
      'an unknown option key',
    );
    expect(await (postgres?.canary() ?? sqlite!.canary())).toEqual(CANARY);
  });
});
