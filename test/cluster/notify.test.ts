/**
 * NOTIFY on one real Postgres: a notification wakes the owning worker at commit, long before
 * pollInterval, on whichever of two relaying nodes owns the partition; one notification per
 * transaction and partition, however many publish() calls; the listener reconnects after its
 * connection is killed.
 */
import pg from 'pg';
import { describe, expect, test } from 'vitest';
import { functionRelay, hashGroupKey, type DeliveryContext, type Envelope } from 'outboxer';
import { DATABASE_URL, publishInTransaction } from '../support/databases.js';
import { sleep, waitUntil } from '../support/random.js';
import { fixture, instance, newTable, setUpPostgres } from './support.js';

setUpPostgres();

/**
 * A connection LISTENing on outboxer's channel, keeping the payloads of one instance name: the
 * channel is shared by every test file on this database.
 */
async function notificationsFrom(name: string) {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  const payloads: string[] = [];
  await client.connect();
  client.on('notification', (message) => {
    if (message.payload?.startsWith(`${name}:`)) payloads.push(message.payload);
  });
  await client.query('LISTEN outboxer');
  return { payloads, client };
}

/**
 * A node with `notify` whose heartbeat comes every 40 s and its poll every minute: within a wait
 * shorter than those, only a notification wakes its worker. `received` counts its deliveries.
 */
function wokenOnlyByNotifications(table: string) {
  const received: Envelope[] = [];
  const node = instance(
    table,
    {
      relay: functionRelay(async (m: Envelope) => void received.push(m)),
      notify: true,
      pollInterval: 60_000,
    },
    { leaseTimeout: 120_000 },
  );
  return { node, received };
}

describe('NOTIFY', () => {
  test('wakes the owning worker at commit, long before pollInterval', async () => {
    const table = newTable();
    const { node, received } = wokenOnlyByNotifications(table);
    try {
      await node.migrate();
      await node.start();
      await sleep(200); // the first poll found nothing; the next one is a minute away
      await publishInTransaction(fixture, node, [{ outbox: 'events', payload: 1, groupKey: 'g' }]);
      // Well within the heartbeat and the poll: only the notification can have woken the worker.
      await waitUntil(() => received.length === 1, 20_000, 'the wake-up');
    } finally {
      await node.stop();
    }
  });

  test('a wake-up reaches whichever of two relaying nodes owns the partition, from a publish-only node', async () => {
    const table = newTable();
    const received: Array<{ node: string; partition: number; id: number }> = [];
    const relayFor = (node: string) =>
      functionRelay(
        async (m: Envelope, context: DeliveryContext) =>
          void received.push({ node, partition: context.partition, id: m.id }),
      );
    const options = { notify: true, partitions: 2, pollInterval: 60_000 };
    // A heartbeat every 40 s (which would wake a worker with a message due): within the waits
    // below, only the notifications wake them; the partitions spread on the join notification.
    const nodes = ['x', 'y'].map((node) =>
      instance(table, { ...options, relay: relayFor(node) }, { leaseTimeout: 120_000 }),
    );
    const publisher = instance(table, { notify: true, partitions: 2 }, { relay: false });
    // Two group keys per partition, so each transaction writes to both.
    const keys = [0, 1].flatMap((partition) =>
      Array.from({ length: 200 }, (_, i) => `order:${i}`)
        .filter((key) => hashGroupKey(key) % 2 === partition)
        .slice(0, 2),
    );
    try {
      await publisher.migrate();
      for (const node of nodes) await node.start();
      await waitUntil(
        async () =>
          (await fixture.query(`SELECT DISTINCT owner FROM ${table}_leases WHERE partition IN (0, 1)`))
            .length === 2,
        15_000,
        'one partition per node',
      );
      await sleep(300); // the new owner's first poll found nothing; the next one is a minute away
      for (let round = 1; round <= 3; round += 1) {
        const ids = await publishInTransaction(
          fixture,
          publisher,
          keys.map((groupKey) => ({ outbox: 'events', payload: round, groupKey })),
        );
        // Well within the heartbeat and the poll: only the notifications can have woken the workers.
        await waitUntil(
          () => ids.every((id) => received.some((r) => r.id === id)),
          20_000,
          `round ${round} to be picked up`,
        );
      }
      // Each partition was delivered by one node, and each node delivered one partition.
      const owners = new Map<number, Set<string>>();
      for (const r of received) owners.set(r.partition, (owners.get(r.partition) ?? new Set()).add(r.node));
      expect([...owners.keys()].sort()).toEqual([0, 1]);
      expect([...owners.values()].map((n) => n.size)).toEqual([1, 1]);
      expect(new Set([...owners.values()].flatMap((n) => [...n])).size).toBe(2);
    } finally {
      await Promise.all(nodes.map((n) => n.stop()));
    }
  });

  test('one notification per transaction and partition, with the instance name in the payload', async () => {
    const table = newTable();
    const node = instance(table, { notify: true, partitions: 2 }, { relay: false, name: 'shop' });
    const { payloads, client } = await notificationsFrom('shop');
    try {
      await node.migrate();
      await publishInTransaction(
        fixture,
        node,
        Array.from({ length: 50 }, (_, i) => ({ outbox: 'events', payload: i, groupKey: `g${i}` })),
      );
      await waitUntil(() => payloads.length >= 2, 5000, 'the notifications');
      await sleep(100);
      expect(payloads.sort()).toEqual(['shop:events:0', 'shop:events:1']);
    } finally {
      await client.end();
    }
  });

  test('several publish() calls in one transaction still send one notification per partition', async () => {
    const table = newTable();
    const node = instance(table, { notify: true, partitions: 2 }, { relay: false, name: 'shop' });
    const { payloads, client } = await notificationsFrom('shop');
    const publishSeveral = (from: number, count: number) =>
      fixture.transaction(async (tx) => {
        for (let i = from; i < from + count; i += 1)
          await node.publish(tx as never, 'events', i, { groupKey: `g${i}` });
      });
    try {
      await node.migrate();
      await publishSeveral(0, 20);
      await waitUntil(() => payloads.length >= 2, 5000, 'the notifications');
      await sleep(100);
      expect([...payloads].sort()).toEqual(['shop:events:0', 'shop:events:1']);
      // Per transaction, not once for good: the next transaction notifies again.
      await publishSeveral(20, 20);
      await waitUntil(() => payloads.length >= 4, 5000, "the second transaction's notifications");
      await sleep(100);
      expect(payloads.slice(2).sort()).toEqual(['shop:events:0', 'shop:events:1']);
    } finally {
      await client.end();
    }
  });

  test('the listener reconnects after its connection is killed, and wake-ups resume', async () => {
    const table = newTable();
    const { node, received } = wokenOnlyByNotifications(table);
    try {
      await node.migrate();
      await node.start();
      const killed = await fixture.query(
        `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = '${fixture.schema}:outboxer-listener'`,
      );
      expect(killed.length).toBeGreaterThanOrEqual(1);
      await waitUntil(
        async () =>
          (
            await fixture.query(
              `SELECT 1 FROM pg_stat_activity WHERE application_name = '${fixture.schema}:outboxer-listener' AND query ILIKE 'LISTEN%'`,
            )
          ).length >= 1,
        10_000,
        'the listener to reconnect',
      );
      await sleep(300); // its reconnect already woke every worker once: let that poll pass
      await publishInTransaction(fixture, node, [{ outbox: 'events', payload: 1, groupKey: 'g' }]);
      // Well within the heartbeat and the poll: only the notification can have woken the worker.
      await waitUntil(() => received.length === 1, 20_000, 'a wake-up after the reconnect');
    } finally {
      await node.stop();
    }
  });
});
