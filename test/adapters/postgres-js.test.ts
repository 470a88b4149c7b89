/** postgres.js through the adapter behaviour suite, with its native LISTEN. */
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay } from 'outboxer';
import { postgresJs, type PostgresJsTransaction } from 'outboxer/postgres-js';
import { DATABASE_URL, postgresFixture } from '../support/databases.js';
import { adapterBehaviour } from './behaviour.js';

class Rollback extends Error {}

adapterBehaviour<PostgresJsTransaction>({
  name: 'postgres.js',
  dialect: 'postgres',
  sync: false,
  async open(target) {
    if (target.kind !== 'postgres') throw new Error('postgres only');
    const sql = postgres(target.url, {
      max: 4,
      onnotice: () => undefined,
      connection: { search_path: target.schema },
    });
    return {
      database: postgresJs(sql),
      transaction: async (fn) => (await sql.begin((tx) => fn(tx))) as never,
      async rollback(fn) {
        // postgres.js rolls back when the callback throws.
        await sql
          .begin(async (tx) => {
            await fn(tx);
            throw new Rollback();
          })
          .catch((error: unknown) => {
            if (!(error instanceof Rollback)) throw error;
          });
      },
      notTransactions: () => ({ 'the root sql': sql }),
      close: () => sql.end({ timeout: 5 }),
    };
  },
});

describe('postgres.js specifics', () => {
  let fixture: Awaited<ReturnType<typeof postgresFixture>>;
  let sql: postgres.Sql;
  beforeAll(async () => {
    fixture = await postgresFixture(2);
    sql = postgres(DATABASE_URL, {
      max: 2,
      onnotice: () => undefined,
      connection: { search_path: fixture.schema },
    });
  });
  afterAll(async () => {
    await sql.end({ timeout: 5 });
    await fixture.close();
  });

  test('a JSON payload is stored as JSON, not as a JSON string (postgres.js would stringify a json parameter)', async () => {
    const outboxer = new Outboxer({
      database: postgresJs(sql),
      outboxes: { events: { table: 'json_kind' } },
      relay: false,
    });
    await outboxer.migrate();
    await sql.begin((tx) =>
      outboxer.publishMany(tx, [
        { outbox: 'events', payload: { a: 1 } },
        { outbox: 'events', payload: [true] },
      ]),
    );
    await sql.begin((tx) => outboxer.publish(tx, 'events', { b: 2 }));
    const rows = await fixture.query(`SELECT json_typeof(payload) AS kind FROM json_kind ORDER BY id`);
    expect(rows.map((r) => r.kind)).toEqual(['object', 'array', 'object']);
  });

  test('a sql with a column transform publishes; its relay side asks for a plain sql', async () => {
    const camel = postgres(DATABASE_URL, {
      max: 1,
      onnotice: () => undefined,
      transform: postgres.camel,
      connection: { search_path: fixture.schema },
    });
    try {
      const relay = functionRelay(async () => undefined);
      const refused = new Outboxer({
        database: postgresJs(camel),
        outboxes: { events: { relay, table: 'camel' } },
        testing: 'manual',
      });
      await expect(refused.migrate()).rejects.toMatchObject({
        code: 'DATABASE_UNSUPPORTED',
        message: expect.stringContaining('relayDatabase'),
      });

      const outboxer = new Outboxer({
        database: postgresJs(camel, { relayDatabase: postgresJs(sql) }),
        outboxes: { events: { relay, table: 'camel' } },
        testing: 'manual',
      });
      await outboxer.migrate();
      const id = await camel.begin((tx) => outboxer.publish(tx, 'events', { n: 1 }, { groupKey: 'g' }));
      const { delivered } = await outboxer.drain();
      expect(delivered.map((m) => [m.id, m.groupKey])).toEqual([[id, 'g']]);
    } finally {
      await camel.end({ timeout: 5 });
    }
  });
});
