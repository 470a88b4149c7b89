/**
 * One worker per partition across instances, on every server database: a paused worker that lost
 * its partition writes nothing, an idle worker keeps its lease, and partitions spread across live
 * instances and move to the survivors. (SQLite is single-node: it has its own lease tests.)
 */
import diagnostics from 'node:diagnostics_channel';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, PermanentError, functionRelay, type Envelope, type OutboxOptions } from 'outboxer';
import { fixtures, publishInTransaction, type Fixture } from '../support/databases.js';
import { sleep, waitUntil } from '../support/random.js';

function listen(channel: string) {
  const events: Record<string, unknown>[] = [];
  const listener = (message: unknown) => events.push(message as Record<string, unknown>);
  diagnostics.subscribe(channel, listener);
  return { events, stop: () => diagnostics.unsubscribe(channel, listener) };
}

describe.each(fixtures.filter((f) => f.name !== 'sqlite'))(
  'one worker per partition across instances on $name',
  ({ make }) => {
    let fixture: Fixture;
    beforeAll(async () => {
      fixture = await make();
    });
    afterAll(() => fixture.close());

    let tables = 0;
    const newTable = () => `partitions_${++tables}`;
    function instance(table: string, options: OutboxOptions, leaseTimeout = 600) {
      return new Outboxer({
        database: fixture.database,
        outboxes: { events: { table, pollInterval: 20, backoff: { min: 10, max: 50 }, ...options } },
        leaseTimeout,
      } as never) as Outboxer<never, false>;
    }

    /** The live leases of a table: unexpired by the server's clock, which each dialect keeps its own way. */
    async function liveLeases(table: string): Promise<Array<{ owner: string; epoch: number }>> {
      const rows =
        fixture.kind === 'mysql'
          ? await fixture.query(
              `SELECT owner, epoch FROM "${table}_leases" WHERE lease_until > TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 ORDER BY "partition"`,
            )
          : await fixture.query(
              `SELECT owner, epoch FROM "${table}_leases" WHERE lease_until > now() ORDER BY partition`,
            );
      return rows.map((row) => ({ owner: String(row.owner), epoch: Number(row.epoch) }));
    }

    test('a paused worker that lost its partition cannot acknowledge or dead-letter anything', async () => {
      const table = newTable();
      const lost = listen('outboxer:lease:lost');
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let stalledBatch: number[] = [];
      // A: takes the batch, hangs past its deliveryTimeout, then claims every message failed for good.
      const a = instance(table, {
        maxAttempts: 1,
        deliveryTimeout: 100,
        relay: functionRelay(async (m: Envelope) => {
          stalledBatch.push(m.id);
          await gate;
          throw new PermanentError('A thinks this is poison');
        }),
      });
      const delivered: number[] = [];
      const b = instance(table, {
        maxAttempts: 1,
        deliveryTimeout: 100,
        relay: functionRelay(async (m: Envelope) => void delivered.push(m.id)),
      });
      try {
        await a.migrate();
        const ids = await publishInTransaction(
          fixture,
          a,
          [1, 2, 3].map((n) => ({ outbox: 'events', payload: n, groupKey: 'g' })),
        );
        await a.start();
        await waitUntil(() => stalledBatch.length > 0, 10_000, 'A to take the batch');
        stalledBatch = [...ids];
        await b.start();
        // A stopped renewing after deliveryTimeout; its lease lapses and B takes the partition.
        await waitUntil(() => delivered.length === 3, 10_000, 'B to deliver');
        expect(delivered).toEqual(ids);
        release(); // A wakes up and tries to dead-letter the whole batch
        await waitUntil(
          () => lost.events.some((e) => e.outbox === 'events' && e.partition === 0),
          10_000,
          'A to notice',
        );
        const counts = await b.counts('events');
        expect(counts).toMatchObject({ pending: 0, dead: 0 });
      } finally {
        release();
        lost.stop();
        await Promise.all([a.stop(), b.stop()]);
      }
    });

    test('an idle worker keeps its lease although pollInterval is longer than the lease', async () => {
      const table = newTable();
      const lost = listen('outboxer:lease:lost');
      // A 3 s lease, renewed every second: a renewal late by more than two seconds on a loaded
      // machine would be needed to lapse it, which a 600 ms lease did not survive.
      const node = instance(
        table,
        { pollInterval: 60_000, relay: functionRelay(async () => undefined) },
        3_000,
      );
      try {
        await node.migrate();
        await node.start();
        await waitUntil(async () => (await liveLeases(table)).length === 1, 5_000, 'the lease');
        const first = await liveLeases(table);
        // Three lease periods without a message: the lease is renewed, never lapses.
        for (let i = 0; i < 15; i += 1) {
          await sleep(600);
          expect(await liveLeases(table)).toEqual(first);
        }
        expect(lost.events.filter((e) => e.outbox === 'events')).toEqual([]);
      } finally {
        lost.stop();
        await node.stop();
      }
    });

    test('partitions spread across live instances, and move to the survivors when one stops', async () => {
      const table = newTable();
      const relay = functionRelay(async () => undefined);
      const nodes = [0, 1, 2].map(() => instance(table, { relay, partitions: 6 }));
      const owners = async () => {
        const byOwner = new Map<string, number>();
        for (const { owner } of await liveLeases(table)) byOwner.set(owner, (byOwner.get(owner) ?? 0) + 1);
        return [...byOwner.values()];
      };
      try {
        await nodes[0]!.migrate();
        for (const node of nodes) await node.start();
        await waitUntil(
          async () => {
            const counts = await owners();
            return counts.length === 3 && counts.every((n) => n === 2);
          },
          15_000,
          'two partitions per node',
        );
        await nodes[2]!.stop();
        await waitUntil(
          async () => {
            const counts = await owners();
            return counts.length === 2 && counts.reduce((sum, n) => sum + n, 0) === 6;
          },
          15_000,
          'the survivors to take every partition',
        );
      } finally {
        await Promise.all(nodes.map((n) => n.stop()));
      }
    });
  },
);
