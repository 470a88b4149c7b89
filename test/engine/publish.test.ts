/**
 * What publish() returns and writes on each adapter: the id synchronously inside better-sqlite3's
 * db.transaction(), a value or a promise by the adapter's type, publishMany in one statement on
 * Postgres and in the order given on SQLite, and publishHeaders added to every message (with
 * counts() reporting the oldest pending one).
 */
import { expect, expectTypeOf, test } from 'vitest';
import { Outboxer, functionRelay } from 'outboxer';
import { postgresFixture, sqliteFixture } from '../support/databases.js';

test('better-sqlite3: publish returns the id synchronously inside db.transaction()', async () => {
  const fixture = sqliteFixture();
  try {
    const outboxer = new Outboxer({
      database: fixture.database as never,
      outboxes: { a: { relay: functionRelay(async () => undefined) } },
      testing: 'manual',
    });
    await outboxer.migrate();
    const id = fixture.db.transaction(() => outboxer.publish(fixture.db as never, 'a', { x: 1 }))();
    expect(typeof id).toBe('number');
    const ids = fixture.db.transaction(() =>
      outboxer.publishMany(fixture.db as never, [
        { outbox: 'a', payload: 1 },
        { outbox: 'a', payload: 2 },
      ]),
    )();
    expect(ids).toEqual([(id as unknown as number) + 1, (id as unknown as number) + 2]);
  } finally {
    await fixture.close();
  }
});

test('the publish return type follows the adapter: a value on better-sqlite3, a promise on pg', async () => {
  const sqlite = sqliteFixture();
  const pg = await postgresFixture(1);
  const { betterSqlite3 } = await import('outboxer/better-sqlite3');
  const { nodePostgres } = await import('outboxer/pg');
  const relay = functionRelay(async () => undefined);
  const sync = new Outboxer({
    database: betterSqlite3(sqlite.db),
    outboxes: { a: { relay } },
    testing: 'manual',
  });
  const async = new Outboxer({
    database: nodePostgres(pg.pool),
    outboxes: { a: { relay } },
    testing: 'manual',
  });
  expectTypeOf(sync.publish).returns.toEqualTypeOf<number>();
  expectTypeOf(async.publish).returns.toEqualTypeOf<Promise<number>>();
  // @ts-expect-error a pool is not a transaction
  void (() => async.publish(pg.pool, 'a', {}));
  await sqlite.close();
  await pg.close();
});

test('publishMany writes many messages in one statement (Postgres)', async () => {
  const fixture = await postgresFixture();
  try {
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { a: { relay: functionRelay(async () => undefined) } },
      testing: 'manual',
    });
    await outboxer.migrate();
    const statements: string[] = [];
    await fixture.transaction(async (client) => {
      // The transaction client, seen through a wrapper that records every statement sent.
      const tx = {
        query: (text: string, values: unknown[]) => {
          statements.push(text);
          return client.query(text, values);
        },
        getTransactionStatus: () => client.getTransactionStatus(),
      };
      const ids = await outboxer.publishMany(
        tx as never,
        Array.from({ length: 500 }, (_, i) => ({ outbox: 'a', payload: i, groupKey: `g${i % 7}` })),
      );
      expect(ids).toHaveLength(500);
      expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    });
    expect(statements).toHaveLength(1);
    const pending = await outboxer.listPending('a', { limit: 500 });
    expect(pending.map((m) => m.payload)).toEqual(Array.from({ length: 500 }, (_, i) => i));
  } finally {
    await fixture.close();
  }
});

test.each([
  ['listed in VALUES', 150],
  ['read with json_each', 450],
])('publishMany on SQLite keeps the order given, rows %s', async (_, count) => {
  const fixture = sqliteFixture();
  try {
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { a: { relay: functionRelay(async () => undefined) } },
      testing: 'manual',
    });
    await outboxer.migrate();
    const ids = await fixture.transaction((db) =>
      outboxer.publishMany(
        db,
        Array.from({ length: count }, (_, i) => ({
          outbox: 'a',
          payload: i,
          groupKey: i % 5 === 4 ? null : `g${i % 7}`,
          type: `t${i % 3}`,
          headers: { n: String(i) },
        })),
      ),
    );
    expect(ids).toHaveLength(count);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    const pending = await outboxer.listPending('a', { limit: count });
    expect(pending.map((m) => [m.id, m.payload, m.groupKey, m.type, m.headers.n])).toEqual(
      ids.map((id, i) => [id, i, i % 5 === 4 ? null : `g${i % 7}`, `t${i % 3}`, String(i)]),
    );
  } finally {
    await fixture.close();
  }
});

test('publishHeaders adds headers to every message (its own headers win), and counts() reports the oldest pending message', async () => {
  const fixture = sqliteFixture();
  try {
    let traceparent = '00-aaaa-bbbb-01';
    const outboxer = new Outboxer({
      database: fixture.database as never,
      outboxes: { a: { relay: functionRelay(async () => undefined) } },
      testing: 'manual',
      publishHeaders: () => ({ traceparent, tenant: 'acme' }),
    });
    await outboxer.migrate();
    expect((await outboxer.counts('a')).oldestPendingAt).toBeNull();
    fixture.db.transaction(() => {
      outboxer.publish(fixture.db as never, 'a', 1);
      traceparent = '00-cccc-dddd-01';
      outboxer.publish(fixture.db as never, 'a', 2, { headers: { tenant: 'other' } });
    })();
    const pending = await outboxer.listPending('a');
    expect(pending.map((m) => m.headers)).toEqual([
      { traceparent: '00-aaaa-bbbb-01', tenant: 'acme' },
      { traceparent: '00-cccc-dddd-01', tenant: 'other' },
    ]);
    const counts = await outboxer.counts('a');
    expect(counts.oldestPendingAt).toEqual(pending[0]!.insertedAt);
  } finally {
    await fixture.close();
  }
});
