/**
 * Start, stop, migrate, publish-only instances, manual testing mode, typed messages and telemetry,
 * on every engine; and migrate() upgrading a lease table from an earlier build (Postgres). What
 * publish() returns and writes on each adapter: publish.test.ts.
 */
import diagnostics from 'node:diagnostics_channel';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, defineMessage, functionRelay, type Envelope } from 'outboxer';
import {
  engineFixtures,
  reportSkippedFixtures,
  postgresFixture,
  publishInTransaction,
  type EngineFixture,
} from '../support/databases.js';
import { sleep, waitUntil } from '../support/random.js';

describe.each(engineFixtures)('lifecycle on $name', ({ name, make }) => {
  let fixture: EngineFixture;
  beforeAll(async () => {
    fixture = await make();
  });
  afterAll(() => fixture.close());

  test('migrate() is idempotent and safe when several instances run it at once', async () => {
    const relay = functionRelay(async () => undefined);
    const instances = Array.from(
      { length: 4 },
      () =>
        new Outboxer({
          database: fixture.database,
          outboxes: { a: { relay, table: 'migrate_race' } },
          testing: 'manual',
        }),
    );
    await Promise.all(instances.map((o) => o.migrate()));
    await instances[0]!.migrate();
    expect(await instances[0]!.counts('a')).toMatchObject({ pending: 0, delivered: 0, dead: 0 });
  });

  test('stop() finishes the batch in flight and acknowledges it: nothing half-acknowledged', async () => {
    const delivered: number[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered = false;
    const relay = functionRelay(async (m: Envelope) => {
      entered = true;
      await gate;
      delivered.push(m.id);
    });
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { a: { relay, table: 'graceful', pollInterval: 10 } },
    });
    await outboxer.migrate();
    const ids = await publishInTransaction(
      fixture,
      outboxer,
      Array.from({ length: 5 }, (_, i) => ({ outbox: 'a', payload: i, groupKey: 'g' })),
    );
    await outboxer.start();
    await waitUntil(() => entered, 10_000, 'the batch to start');
    const stopping = outboxer.stop();
    await sleep(50);
    release();
    await stopping;
    expect(delivered).toEqual(ids);
    expect(await outboxer.counts('a')).toMatchObject({ pending: 0, delivered: 0, dead: 0 });
  });

  test('past shutdownTimeout a stuck batch is abandoned unacknowledged, and stop() returns', async () => {
    let entered = false;
    const relay = functionRelay(async (_m, context) => {
      entered = true;
      await new Promise((resolve) => context.signal.addEventListener('abort', resolve));
    });
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { a: { relay, table: 'stuck', pollInterval: 10 } },
      shutdownTimeout: 100,
    });
    await outboxer.migrate();
    await publishInTransaction(fixture, outboxer, [{ outbox: 'a', payload: 1, groupKey: 'g' }]);
    await outboxer.start();
    await waitUntil(() => entered, 10_000, 'the batch to start');
    // The relay never returns on its own: stop() returns only because it abandons the batch.
    await outboxer.stop();
    const [message] = await outboxer.listPending('a');
    expect(message).toMatchObject({ attempts: 0 });
  });

  test('a publish-only instance needs no relay, starts nothing, and still has the whole admin API', async () => {
    const publisher = new Outboxer({
      database: fixture.database,
      outboxes: { a: { table: 'publish_only', maxAttempts: 1 } },
      relay: false,
    });
    await publisher.migrate();
    await publisher.start(); // no-op
    const [id] = await publishInTransaction(fixture, publisher, [
      { outbox: 'a', payload: { x: 1 }, groupKey: 'g' },
    ]);
    expect(await publisher.counts('a')).toMatchObject({ pending: 1, delivered: 0, dead: 0 });
    expect((await publisher.listPending('a')).map((m) => m.id)).toEqual([id]);
    expect(await publisher.listDead('a')).toEqual([]);
    expect(await publisher.retryDead('a')).toBe(0);
    expect(await publisher.discard('a', [id!])).toBe(1);
    await publisher.stop();
  });

  test('manual testing mode: drain() delivers through the real relay, retries without waiting, and reports', async () => {
    let failures = 0;
    const relay = functionRelay(async (m: Envelope) => {
      if (m.payload === 'flaky' && failures < 2) {
        failures += 1;
        throw new Error('flaky');
      }
    });
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { a: { relay, table: 'manual', backoff: { min: 60_000, max: 60_000 } } },
      testing: 'manual',
    });
    await outboxer.migrate();
    await outboxer.start(); // no workers in manual mode
    const ids = await publishInTransaction(fixture, outboxer, [
      { outbox: 'a', payload: 'flaky', groupKey: 'g' },
      { outbox: 'a', payload: 'fine', groupKey: 'g' },
    ]);
    // Two backoffs of a minute each are longer than the test's timeout: drain() did not wait for them.
    const result = await outboxer.drain();
    expect(result.delivered.map((m) => m.id)).toEqual(ids);
    expect(result.retried.map((r) => r.error)).toEqual(['Error: flaky', 'Error: flaky']);
    expect(result.pending).toBe(0);
    await outboxer.close();
  });

  test('drain() gives up on a message that never succeeds after maxRounds and reports it pending', async () => {
    const relay = functionRelay(async () => {
      throw new Error('never');
    });
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { a: { relay, table: 'poison' } },
      testing: 'manual',
    });
    await outboxer.migrate();
    await publishInTransaction(fixture, outboxer, [{ outbox: 'a', payload: 1, groupKey: 'g' }]);
    const result = await outboxer.drain('a', { maxRounds: 3 });
    expect(result).toMatchObject({ pending: 1, rounds: 3 });
    expect(result.retried).toHaveLength(3);
    await outboxer.close();
  });

  test('typed messages: defineMessage carries outbox, type and group key', async () => {
    const seen: Envelope[] = [];
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { orders: { relay: functionRelay(async (m) => void seen.push(m)), table: 'typed' } },
      testing: 'manual',
    });
    await outboxer.migrate();
    const OrderPaid = defineMessage<{ orderId: number; amount: number }>({
      outbox: 'orders',
      type: 'OrderPaid',
      groupKey: (order) => `order:${order.orderId}`,
      headers: (order) => ({ 'x-amount': String(order.amount) }),
    });
    const AuditNote = defineMessage<{ note: string }>({ outbox: 'orders', type: 'AuditNote' });
    // @ts-expect-error the payload is type-checked
    expect(() => OrderPaid({ orderId: 'x' })).not.toThrow();
    await publishInTransaction(fixture, outboxer, [
      OrderPaid({ orderId: 42, amount: 10 }),
      AuditNote({ note: 'hi' }),
    ]);
    await outboxer.drain();
    expect(seen.map((m) => [m.type, m.groupKey, m.headers])).toEqual([
      ['OrderPaid', 'order:42', { 'x-amount': '10' }],
      ['AuditNote', null, {}],
    ]);
    await outboxer.close();
  });

  test('telemetry: publish, batch start/stop, retry, dead and prune events on diagnostics_channel', async () => {
    const events: Array<[string, Record<string, unknown>]> = [];
    const names = ['publish', 'batch:start', 'batch:stop', 'message:retry', 'message:dead', 'prune'];
    const listeners = names.map((n) => {
      const listener = (message: unknown) => events.push([n, message as Record<string, unknown>]);
      diagnostics.subscribe(`outboxer:${n}`, listener);
      return () => diagnostics.unsubscribe(`outboxer:${n}`, listener);
    });
    try {
      const relay = functionRelay(async (m: Envelope) => {
        if (m.payload === 'bad') throw new Error('bad');
      });
      const outboxer = new Outboxer({
        database: fixture.database,
        outboxes: { t: { relay, table: `telemetry_${name}`, maxAttempts: 2, retention: { keep: 0 } } },
        testing: 'manual',
        name: 'telemetry',
      });
      await outboxer.migrate();
      await publishInTransaction(fixture, outboxer, [
        { outbox: 't', payload: 'good', groupKey: 'a' },
        { outbox: 't', payload: 'bad', groupKey: 'b' },
      ]);
      await outboxer.drain();
      await sleep(5);
      await outboxer.prune('t');
      await outboxer.close();
      const kinds = events.map(([n]) => n);
      expect(kinds).toEqual([
        'publish',
        'batch:start',
        'batch:stop',
        'message:retry',
        'batch:start',
        'batch:stop',
        'message:dead',
        'prune',
      ]);
      expect(events[0]![1]).toMatchObject({ instance: 'telemetry', outboxes: ['t'], count: 2 });
      expect(events[2]![1]).toMatchObject({
        outbox: 't',
        partition: 0,
        size: 2,
        delivered: 1,
        failed: 1,
        aborted: false,
      });
      expect(typeof events[2]![1].duration).toBe('number');
      expect(events[3]![1]).toMatchObject({ outbox: 't', groupKey: 'b', attempts: 1, error: 'Error: bad' });
      expect(events[6]![1]).toMatchObject({ outbox: 't', groupKey: 'b', attempts: 2 });
      expect(events[7]![1]).toMatchObject({ outbox: 't', pruned: 1 });
    } finally {
      for (const unsubscribe of listeners) unsubscribe();
    }
  });
});

test('migrate() adds rewinds to a lease table created before it existed (Postgres)', async () => {
  const fixture = await postgresFixture();
  try {
    // The lease table as earlier builds created it.
    await fixture.query(`CREATE TABLE old_leases (
  outbox text NOT NULL, partition integer NOT NULL, owner text NOT NULL, epoch bigint NOT NULL,
  lease_until timestamptz NOT NULL, PRIMARY KEY (outbox, partition))`);
    await fixture.query(`INSERT INTO old_leases VALUES ('a', 0, 'gone', 3, now() - interval '1 hour')`);
    const delivered: number[] = [];
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { a: { table: 'old', relay: functionRelay(async (m) => void delivered.push(m.id)) } },
      testing: 'manual',
    });
    await outboxer.migrate();
    await outboxer.migrate();
    const columns = await fixture.query(
      `SELECT column_name, column_default FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'old_leases' AND column_name = 'rewinds'`,
    );
    expect(columns).toEqual([{ column_name: 'rewinds', column_default: '0' }]);
    expect(await fixture.query(`SELECT rewinds::int FROM old_leases`)).toEqual([{ rewinds: 0 }]);
    const ids = await fixture.transaction(
      async (tx) => await outboxer.publishMany(tx, [{ outbox: 'a', payload: 1 }]),
    );
    await outboxer.drain('a');
    expect(delivered).toEqual(ids);
  } finally {
    await fixture.close();
  }
});

reportSkippedFixtures('lifecycle');
