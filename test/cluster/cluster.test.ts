/**
 * Several instances against one real Postgres: NOTIFY wake-ups and listener reconnects, serialised
 * writes, publish-only instances, configuration agreement and connection accounting. Lease fencing
 * and partition spreading run on every server database: partitions.test.ts.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  Outboxer,
  functionRelay,
  hashGroupKey,
  type DeliveryContext,
  type Envelope,
  type OutboxOptions,
} from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { DATABASE_URL, postgresFixture, publishInTransaction } from '../support/databases.js';
import { sleep, waitUntil } from '../support/random.js';

type Fixture = Awaited<ReturnType<typeof postgresFixture>>;

let fixture: Fixture;
beforeAll(async () => {
  fixture = await postgresFixture(20);
});
afterAll(() => fixture.close());

let tables = 0;
function instance(table: string, options: OutboxOptions, extra: Record<string, unknown> = {}) {
  return new Outboxer({
    database: fixture.database,
    outboxes: { events: { table, pollInterval: 20, backoff: { min: 10, max: 50 }, ...options } },
    leaseTimeout: 600,
    ...extra,
  } as never) as Outboxer<never, false>;
}
const newTable = () => `cluster_${++tables}`;

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

describe('NOTIFY', () => {
  test('wakes the owning worker at commit, long before pollInterval', async () => {
    const table = newTable();
    const received: number[] = [];
    // A heartbeat every 40 s, a poll every minute: within the wait below, only a notification wakes it.
    const node = instance(
      table,
      {
        relay: functionRelay(async () => void received.push(Date.now())),
        notify: true,
        pollInterval: 60_000,
      },
      { leaseTimeout: 120_000 },
    );
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
    const received: Array<{ node: string; partition: number; id: number; at: number }> = [];
    const relayFor = (node: string) =>
      functionRelay(
        async (m: Envelope, context: DeliveryContext) =>
          void received.push({ node, partition: context.partition, id: m.id, at: Date.now() }),
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
    const received: number[] = [];
    // A heartbeat every 40 s, a poll every minute: within the wait below, only a notification wakes it.
    const node = instance(
      table,
      {
        relay: functionRelay(async () => void received.push(Date.now())),
        notify: true,
        pollInterval: 60_000,
      },
      { leaseTimeout: 120_000 },
    );
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

describe('serializeWrites', () => {
  async function race(serializeWrites: boolean) {
    const table = newTable();
    const node = instance(table, { serializeWrites }, { relay: false });
    await node.migrate();
    const first = await fixture.pool.connect();
    const second = await fixture.pool.connect();
    try {
      await first.query('BEGIN');
      await second.query('BEGIN');
      const firstId = await node.publish(first as never, 'events', 'first', { groupKey: 'order:1' });
      let secondId: number | undefined;
      const secondPublish = (
        node.publish(second as never, 'events', 'second', { groupKey: 'order:1' }) as Promise<number>
      ).then((id) => (secondId = id));
      await sleep(300);
      const blocked = secondId === undefined;
      const otherGroup = await (async () => {
        // Another group is not held up by the lock.
        const third = await fixture.pool.connect();
        try {
          await third.query('BEGIN');
          const id = await node.publish(third as never, 'events', 'other', { groupKey: 'order:2' });
          await third.query('COMMIT');
          return id;
        } finally {
          third.release();
        }
      })();
      await first.query('COMMIT');
      await secondPublish;
      await second.query('COMMIT');
      return { blocked, firstId, secondId: secondId!, otherGroup };
    } finally {
      first.release();
      second.release();
    }
  }

  test('concurrent publishers of one group queue up, so id order is commit order', async () => {
    const result = await race(true);
    expect(result.blocked).toBe(true);
    expect(result.secondId).toBeGreaterThan(result.firstId);
    expect(result.otherGroup).toBeGreaterThan(result.firstId);
  });

  test('without it, the second publisher does not wait (the control experiment)', async () => {
    const result = await race(false);
    expect(result.blocked).toBe(false);
  });
});

/** Migrates and starts `node`, then publishes `count` messages to `events` in one transaction. */
async function startWithBacklog(node: Outboxer, count: number, groupKey: (i: number) => string) {
  await node.migrate();
  await node.start();
  await publishInTransaction(
    fixture,
    node,
    Array.from({ length: count }, (_, i) => ({ outbox: 'events', payload: i, groupKey: groupKey(i) })),
  );
}

/** The most pooled connections of this file seen waiting on a lock at once, over `ms`. */
async function mostWaitingOnLock(ms: number): Promise<number> {
  let most = 0;
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const waiting = await fixture.query(
      `SELECT 1 FROM pg_stat_activity WHERE application_name = '${fixture.schema}' AND wait_event_type = 'Lock'`,
    );
    most = Math.max(most, waiting.length);
    await sleep(10);
  }
  return most;
}

describe('publish-only instances and connections', () => {
  test('relay: false opens no connection of its own (no workers, no listener), yet publishes and administers', async () => {
    const pool = new pg.Pool({
      connectionString: DATABASE_URL,
      max: 3,
      options: `-c search_path=${fixture.schema}`,
      application_name: fixture.schema,
    });
    const table = newTable();
    try {
      const node = new Outboxer({
        database: nodePostgres(pool),
        outboxes: { events: { table, notify: true } },
        relay: false,
      });
      await node.start();
      await sleep(300);
      expect(pool.totalCount).toBe(0);
      const listeners = await fixture.query(
        `SELECT 1 FROM pg_stat_activity WHERE application_name = '${fixture.schema}:outboxer-listener'`,
      );
      expect(listeners).toHaveLength(0);
      await node.migrate();
      const client = await pool.connect();
      await client.query('BEGIN');
      await node.publish(client, 'events', { hello: 'world' });
      await client.query('COMMIT');
      client.release();
      expect((await node.counts('events')).pending).toBe(1);
      await node.stop();
    } finally {
      await pool.end();
    }
  });

  test('a relaying node holds at most one pooled connection per partition plus two, and one listener outside the pool', async () => {
    const table = newTable();
    const pool = new pg.Pool({
      connectionString: DATABASE_URL,
      max: 30,
      options: `-c search_path=${fixture.schema}`,
      application_name: fixture.schema,
    });
    // Counted on the pool's own events, not sampled: a connection held for a millisecond counts.
    let busy = 0;
    let peak = 0;
    pool.on('acquire', () => (peak = Math.max(peak, ++busy)));
    pool.on('release', () => (busy -= 1));
    let delivered = 0;
    const node = new Outboxer({
      database: nodePostgres(pool),
      outboxes: {
        events: {
          table,
          partitions: 4,
          notify: true,
          pollInterval: 5,
          batchSize: 30,
          // Kept and pruned, so that the pruner and the tallies' upkeep both run alongside.
          retention: { keep: 1 },
          pruneInterval: 20,
          // 30 messages of 25 ms each outlast leaseTimeout / 3: the lease is renewed mid-delivery.
          // A 2 s lease: with 300 ms, a CI run at load ~10 saw three backends waiting on the tallies'
          // lock instead of one (leases lapsing and partitions changing hands under that load).
          relay: functionRelay(async () => {
            await sleep(25);
            delivered += 1;
          }),
        },
      },
      leaseTimeout: 2_000,
    });
    try {
      await startWithBacklog(node, 600, (i) => `g${i % 40}`);
      await waitUntil(() => delivered >= 600, 30_000, 'every message delivered');
      await waitUntil(
        async () => (await fixture.query(`SELECT 1 FROM "${table}" WHERE status <> 4`)).length === 0,
        10_000,
        'every delivery acknowledged',
      );
      // Hold the housekeeping up for longer than the rows are kept: the tallies' upkeep waits on the
      // lock, and the pruner, with rows now due, must wait its turn rather than take a connection.
      const waitingOnLock = await fixture.transaction(async (tx) => {
        await tx.query(`LOCK TABLE "${table}_tallies" IN ACCESS EXCLUSIVE MODE`);
        return mostWaitingOnLock(2_000);
      });
      await waitUntil(
        async () => (await fixture.query(`SELECT 1 FROM "${table}"`)).length === 0,
        10_000,
        'the kept rows to be pruned',
      );
      expect(waitingOnLock).toBe(1);
      expect(peak).toBeGreaterThanOrEqual(2);
      expect(peak).toBeLessThanOrEqual(4 + 2);
      const listeners = await fixture.query(
        `SELECT 1 FROM pg_stat_activity WHERE application_name = '${fixture.schema}:outboxer-listener'`,
      );
      expect(listeners).toHaveLength(1);
    } finally {
      await node.stop();
      await pool.end();
    }
  });
  test('a lease renewal during a long delivery waits for the statement the round runs meanwhile, instead of taking a second connection', async () => {
    const table = newTable();
    const locker = await fixture.pool.connect();
    let delivered = 0;
    let lockHeld!: () => void;
    const leaseLocked = new Promise<void>((resolve) => (lockHeld = resolve));
    // Batches of 10 messages of 20 ms: each delivery outlasts leaseTimeout / 3 (100 ms).
    const node = instance(
      table,
      {
        partitions: 1,
        batchSize: 10,
        relay: functionRelay(async () => {
          await sleep(20);
          delivered += 1;
          if (delivered === 20) {
            // Before the second batch's acknowledgement goes out with the third batch's poll, the
            // test takes the lease row: that statement, then the renewal, find it locked.
            await locker.query('BEGIN');
            await locker.query(`SELECT 1 FROM "${table}_leases" FOR UPDATE`);
            lockHeld();
          }
        }),
      },
      { leaseTimeout: 300 },
    );
    try {
      await startWithBacklog(node, 60, () => 'g');
      await leaseLocked;
      const waitingOnLock = await mostWaitingOnLock(400);
      await locker.query('COMMIT');
      expect(waitingOnLock).toBe(1);
      await waitUntil(async () => (await node.counts('events')).pending === 0, 10_000, 'the outbox to drain');
      expect(delivered).toBe(60);
    } finally {
      locker.release();
      await node.stop();
    }
  });
});

describe('configuration agreement', () => {
  test('a relaying node whose configuration differs from the recorded one refuses to start, saying what differs', async () => {
    const table = newTable();
    const relay = functionRelay(async () => undefined);
    const first = instance(table, { relay, partitions: 2 });
    await first.migrate();
    await first.start();
    await first.stop();
    const second = instance(table, { relay, partitions: 3, ordering: 'none' });
    await expect(second.start()).rejects.toMatchObject({
      code: 'CONFIGURATION_MISMATCH',
      message: expect.stringMatching(
        /partitions is 3 here but 2 in the database; ordering is "none" here but "group"/,
      ),
    });
    // A publish-only node is not checked: it starts nothing.
    await instance(table, { partitions: 3 }, { relay: false }).start();
  });

  test('changing partitions needs reconfigure, and reconfigure: "force" while messages are pending', async () => {
    const table = newTable();
    const relay = functionRelay(async () => {
      throw new Error('destination down');
    });
    const first = instance(table, { relay, partitions: 2 });
    await first.migrate();
    await first.start();
    await first.stop();
    await publishInTransaction(fixture, first, [{ outbox: 'events', payload: 1, groupKey: 'g' }]);
    await expect(instance(table, { relay, partitions: 4, reconfigure: true }).start()).rejects.toMatchObject({
      code: 'CONFIGURATION_MISMATCH',
      message: expect.stringMatching(/while 1 messages are pending/),
    });
    const forced = instance(table, { relay, partitions: 4, reconfigure: 'force' });
    await forced.start();
    await forced.stop();
    const recorded = await fixture.query(`SELECT partitions FROM ${table}_config WHERE outbox = 'events'`);
    expect(recorded[0]!.partitions).toBe(4);
  });

  test('rows in partitions no worker reads are reported as orphaned', async () => {
    const table = newTable();
    const wide = instance(table, { partitions: 8 }, { relay: false });
    await wide.migrate();
    await publishInTransaction(
      fixture,
      wide,
      Array.from({ length: 40 }, (_, i) => ({ outbox: 'events', payload: i, groupKey: `g${i}` })),
    );
    const narrow = instance(table, { partitions: 2 }, { relay: false });
    const counts = await narrow.counts('events');
    const expected = await fixture.query(`SELECT count(*)::int AS n FROM ${table} WHERE partition >= 2`);
    expect(counts.orphaned).toBe(expected[0]!.n);
    expect(counts.orphaned).toBeGreaterThan(0);
    expect(counts.relaySeenAt).toBeNull();
  });

  test('counts() warns about a silent backlog: messages pending and no relaying node seen', async () => {
    const table = newTable();
    const warnings: string[] = [];
    const logger = {
      debug() {},
      info() {},
      warn: (message: string) => void warnings.push(message),
      error() {},
    };
    const node = instance(table, {}, { relay: false, logger });
    await node.migrate();
    await publishInTransaction(fixture, node, [{ outbox: 'events', payload: 1 }]);
    await node.counts('events');
    expect(warnings.some((w) => /no relaying node has been seen/.test(w))).toBe(true);
  });
});
