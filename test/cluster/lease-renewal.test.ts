/**
 * A worker keeps its lease while its rounds only move blocked messages aside. Behind a head that
 * waits for its retry, a backlog of its group's ready messages is polled a page at a time and
 * held; those rounds deliver nothing and settle nothing, and a full page sends the worker straight
 * into the next round. Without a renewal between them, the lease ran out while the worker was
 * still at work, and another node took the partition over. docs/reliability.md, finding 15.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay, type DatabaseAdapter, type Dialect } from 'outboxer';
import {
  engineFixtures,
  publishInTransaction,
  reportSkippedFixtures,
  type EngineFixture,
} from '../support/databases.js';
import { waitUntil } from '../support/random.js';

reportSkippedFixtures('lease renewal while holding');

describe.each(engineFixtures)('lease renewal on $name', ({ make }) => {
  let fixture: EngineFixture;
  beforeAll(async () => {
    fixture = await make();
  });
  afterAll(() => fixture.close());

  /** The adapter, with the lease renewals, settles and holds the engine asks its dialect for noted in order. */
  function noting(adapter: DatabaseAdapter) {
    const calls: Array<'renew' | 'settle' | 'hold'> = [];
    const dialect = adapter.dialect;
    const noted: Dialect = {
      ...dialect,
      renewLease: (...args) => (calls.push('renew'), dialect.renewLease(...args)),
      settle: (...args) => (calls.push('settle'), dialect.settle(...args)),
      hold: (...args) => (calls.push('hold'), dialect.hold(...args)),
    };
    return { adapter: { ...adapter, dialect: noted } as DatabaseAdapter, calls };
  }

  test('a worker renews its lease between rounds that only hold blocked messages', async () => {
    const options = {
      table: 'renewal',
      partitions: 1,
      batchSize: 10,
      // The head waits a minute for its retry: no settle while its group's backlog is held.
      backoff: { min: 60_000, max: 60_000 },
    };
    const publisher = new Outboxer({
      database: fixture.database,
      relay: false,
      outboxes: { renewal: options },
    }) as Outboxer<never, boolean>;
    await publisher.migrate();
    const [head] = await publishInTransaction(fixture, publisher, [
      { outbox: 'renewal', payload: 'head', groupKey: 'g' },
    ]);
    const { adapter, calls } = noting(fixture.database);
    const relaying = new Outboxer({
      database: adapter,
      // Renewed once a third of it has passed: every 33 ms, far shorter than holding the backlog.
      leaseTimeout: 100,
      logger: { debug() {}, info() {}, warn() {}, error() {} },
      outboxes: {
        renewal: {
          ...options,
          relay: functionRelay(async (m) => {
            if (m.id === head) throw new Error('the destination refuses the head');
          }),
        },
      },
    });
    try {
      await relaying.start();
      await waitUntil(async () => calls.includes('settle')); // the head failed: it waits for its retry
      await publishInTransaction(
        fixture,
        publisher,
        Array.from({ length: 2000 }, (_, i) => ({ outbox: 'renewal', payload: i, groupKey: 'g' })),
      );
      // Every message of the backlog held: none left ready.
      const ready = async () =>
        Number((await fixture.query(`SELECT count(*) AS n FROM renewal WHERE status = 0`))[0]!.n);
      await waitUntil(async () => (await ready()) === 0, 60_000);
      const holds = calls.flatMap((call, i) => (call === 'hold' ? [i] : []));
      // Two hundred rounds of ten: the worker held the backlog a page at a time, and renewed its
      // lease between them (there was no settle to do it).
      expect(holds.length).toBeGreaterThanOrEqual(200);
      const during = calls.slice(holds[0], holds[holds.length - 1]);
      expect(during.filter((call) => call === 'settle')).toEqual([]);
      expect(during.filter((call) => call === 'renew').length).toBeGreaterThan(0);
    } finally {
      await relaying.stop();
      await publisher.close();
    }
  }, 120_000);
});
