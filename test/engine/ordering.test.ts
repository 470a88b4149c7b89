/**
 * The product's promise, checked at the destination on both databases: every committed message is
 * delivered at least once, nothing from a rolled-back transaction is, and each group's first
 * deliveries come in id order, under a relay that fails pseudo-randomly (seeded).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  Outboxer,
  batchRelay,
  functionRelay,
  type Envelope,
  type OutboxOptions,
  type PublishInput,
} from 'outboxer';
import {
  engineFixtures,
  reportSkippedFixtures,
  publishInTransaction,
  type EngineFixture,
} from '../support/databases.js';
import { seededRandom, waitUntil } from '../support/random.js';

interface Delivery {
  id: number;
  groupKey: string | null;
  /** Unique per published message, rolled back or not (SQLite reuses the ids of rolled-back rows). */
  seq?: number;
}

/** Checks first deliveries per group are in id order; returns the violations. */
function orderViolations(deliveries: readonly Delivery[]): string[] {
  const seen = new Set<number>();
  const last = new Map<string, number>();
  const violations: string[] = [];
  for (const d of deliveries) {
    if (seen.has(d.id)) continue;
    seen.add(d.id);
    if (d.groupKey === null) continue;
    const previous = last.get(d.groupKey) ?? 0;
    if (d.id < previous) violations.push(`${d.groupKey}: ${d.id} after ${previous}`);
    last.set(d.groupKey, Math.max(previous, d.id));
  }
  return violations;
}

/** A destination that fails with probability `failureRate` (seeded) and records what it accepted. */
function flakyDestination(seed: number, failureRate: number) {
  const random = seededRandom(seed);
  const deliveries: Delivery[] = [];
  const relay = functionRelay(async (message: Envelope) => {
    if (random() < failureRate) throw new Error(`destination refused ${message.id}`);
    deliveries.push({
      id: message.id,
      groupKey: message.groupKey,
      seq: (message.payload as { seq: number }).seq,
    });
  });
  return { relay, deliveries };
}

describe.each(engineFixtures)('ordering on $name', ({ name, make }) => {
  let fixture: EngineFixture;
  beforeAll(async () => {
    fixture = await make();
  });
  afterAll(() => fixture.close());

  let tableCount = 0;
  function newOutboxer(options: OutboxOptions) {
    tableCount += 1;
    return new Outboxer({
      database: fixture.database,
      outboxes: {
        orders: {
          pollInterval: 20,
          backoff: { min: 5, max: 40 },
          table: `ordering_${tableCount}`,
          ...options,
        },
      },
      leaseTimeout: 5000,
    });
  }

  /** Publishes `total` messages over `groups` groups (every 10th unordered) in transactions of 1–40, rolling back ~10%. */
  async function publishWorkload(
    outboxer: Outboxer<never, boolean>,
    total: number,
    groups: number,
    seed: number,
  ) {
    const random = seededRandom(seed);
    const committed: number[] = [];
    const committedSeqs: number[] = [];
    const rolledBackSeqs: number[] = [];
    let n = 0;
    let seq = 0;
    while (n < total) {
      const size = Math.min(total - n, 1 + Math.floor(random() * 40));
      const inputs: PublishInput[] = Array.from({ length: size }, (_, i) => ({
        outbox: 'orders',
        payload: { n: n + i, seq: seq + i },
        groupKey: (n + i) % 10 === 9 ? null : `order:${Math.floor(random() * groups)}`,
      }));
      const seqs = inputs.map((input) => (input.payload as { seq: number }).seq);
      seq += size;
      const rollback = random() < 0.1;
      const ids = await publishInTransaction(fixture, outboxer, inputs, { rollback });
      if (rollback) {
        rolledBackSeqs.push(...seqs);
      } else {
        committed.push(...ids);
        committedSeqs.push(...seqs);
        n += size;
      }
    }
    return { committed, committedSeqs, rolledBackSeqs };
  }

  test('10,000 messages over 120 groups with a relay failing 15% of attempts: all delivered, in order per group, no phantoms', async () => {
    const destination = flakyDestination(42, 0.15);
    const outboxer = newOutboxer({ relay: destination.relay, partitions: 4, batchSize: 200 });
    await outboxer.migrate();
    await outboxer.start();
    try {
      const { committed, committedSeqs, rolledBackSeqs } = await publishWorkload(
        outboxer as never,
        10_000,
        120,
        7,
      );
      expect(rolledBackSeqs.length).toBeGreaterThan(0);
      await waitUntil(
        async () => (await outboxer.counts('orders')).pending === 0,
        120_000,
        'the outbox to drain',
      );
      const delivered = new Set(destination.deliveries.map((d) => d.id));
      const deliveredSeqs = new Set(destination.deliveries.map((d) => d.seq));
      expect(committed.filter((id) => !delivered.has(id))).toEqual([]);
      expect(committedSeqs.filter((seq) => !deliveredSeqs.has(seq))).toEqual([]);
      expect(rolledBackSeqs.filter((seq) => deliveredSeqs.has(seq))).toEqual([]);
      expect(delivered.size).toBe(committed.length);
      expect(orderViolations(destination.deliveries)).toEqual([]);
      expect(await outboxer.counts('orders')).toMatchObject({ pending: 0, delivered: 0, dead: 0 });
    } finally {
      await outboxer.stop();
    }
  });

  test('dead-letter mode: a message failing maxAttempts times goes dead, its group moves on in order', async () => {
    const destination = flakyDestination(3, 0.5);
    const outboxer = newOutboxer({ relay: destination.relay, partitions: 2, maxAttempts: 2 });
    await outboxer.migrate();
    await outboxer.start();
    try {
      const { committed } = await publishWorkload(outboxer as never, 1000, 20, 11);
      await waitUntil(
        async () => (await outboxer.counts('orders')).pending === 0,
        60_000,
        'the outbox to drain',
      );
      const counts = await outboxer.counts('orders');
      const dead = await outboxer.listDead('orders', { limit: 10_000 });
      expect(counts.dead).toBe(dead.length);
      expect(dead.length).toBeGreaterThan(0);
      for (const message of dead) expect(message.attempts).toBe(2);
      const delivered = new Set(destination.deliveries.map((d) => d.id));
      const deadIds = new Set(dead.map((m) => m.id));
      // Every committed message is either delivered or dead, never both, never neither.
      expect(committed.filter((id) => delivered.has(id) === deadIds.has(id))).toEqual([]);
      expect(orderViolations(destination.deliveries)).toEqual([]);

      // retryDead keeps the ids and sends them again.
      const healthy: Delivery[] = [];
      await outboxer.stop();
      const revived = await outboxer.retryDead('orders', { ids: dead.slice(0, 3).map((m) => m.id) });
      expect(revived).toBe(3);
      const drainer = new Outboxer({
        database: fixture.database,
        outboxes: {
          orders: {
            relay: functionRelay(async (m) => void healthy.push({ id: m.id, groupKey: m.groupKey })),
            table: `ordering_${tableCount}`,
            maxAttempts: 2,
            partitions: 2,
          },
        },
        testing: 'manual',
      });
      const result = await drainer.drain('orders');
      // drain() goes partition by partition: compare as sets.
      const revivedIds = dead
        .slice(0, 3)
        .map((m) => m.id)
        .sort((a, b) => a - b);
      expect(result.delivered.map((m) => m.id).sort((a, b) => a - b)).toEqual(revivedIds);
      expect(healthy.map((d) => d.id).sort((a, b) => a - b)).toEqual(revivedIds);
      expect((await drainer.counts('orders')).dead).toBe(dead.length - 3);
      // discard removes dead messages for good.
      expect(
        await drainer.discard(
          'orders',
          dead.slice(3).map((m) => m.id),
        ),
      ).toBe(dead.length - 3);
      expect(await drainer.counts('orders')).toMatchObject({ pending: 0, delivered: 0, dead: 0 });
      await drainer.close();
    } finally {
      await outboxer.stop();
    }
  });

  test('strict mode: a failing head blocks only its group; unordered messages and other groups flow past it', async () => {
    const deliveries: Delivery[] = [];
    let poisonFailures = 0;
    const relay = functionRelay(async (message: Envelope) => {
      if ((message.payload as { poison?: boolean }).poison && poisonFailures < 1_000_000) {
        poisonFailures += 1;
        throw new Error('poison');
      }
      deliveries.push({ id: message.id, groupKey: message.groupKey });
    });
    const outboxer = newOutboxer({ relay, backoff: { min: 10, max: 20 } });
    await outboxer.migrate();
    await outboxer.start();
    try {
      const [poison] = await publishInTransaction(fixture, outboxer, [
        { outbox: 'orders', payload: { poison: true }, groupKey: 'blocked' },
      ]);
      const behind = await publishInTransaction(
        fixture,
        outboxer,
        Array.from({ length: 50 }, (_, i) => ({ outbox: 'orders', payload: { i }, groupKey: 'blocked' })),
      );
      const others = await publishInTransaction(
        fixture,
        outboxer,
        Array.from({ length: 100 }, (_, i) => ({
          outbox: 'orders',
          payload: { i },
          groupKey: i % 2 === 0 ? `other:${i % 7}` : null,
        })),
      );
      await waitUntil(() => deliveries.length >= others.length, 30_000, 'the other groups');
      // Delivered is not yet acknowledged: wait for the batch's settle too.
      await waitUntil(
        async () => (await outboxer.counts('orders')).pending === 1 + behind.length,
        30_000,
        'the acknowledgement of the other groups',
      );
      await waitUntil(
        async () => ((await outboxer.listPending('orders', { limit: 1 }))[0]?.attempts ?? 0) >= 3,
        30_000,
        'retries of the poison message',
      );
      expect(new Set(deliveries.map((d) => d.id))).toEqual(new Set(others));
      expect(deliveries.some((d) => d.groupKey === 'blocked')).toBe(false);

      const pending = await outboxer.listPending('orders', { limit: 1000 });
      expect(pending.map((m) => m.id)).toEqual([poison, ...behind]);
      const head = pending[0]!;
      expect(head.attempts).toBeGreaterThanOrEqual(3);
      expect(head.lastError).toContain('poison');
      expect(head.nextAttemptAt).toBeInstanceOf(Date);

      // Discarding the poison message lets its group continue, in order.
      expect(await outboxer.discard('orders', [poison!])).toBe(1);
      await waitUntil(
        async () => (await outboxer.counts('orders')).pending === 0,
        30_000,
        'the blocked group',
      );
      expect(deliveries.filter((d) => d.groupKey === 'blocked').map((d) => d.id)).toEqual(behind);
    } finally {
      await outboxer.stop();
    }
  });

  test("'total' ordering: one failure holds back everything behind it, then everything flows in id order", async () => {
    const deliveries: number[] = [];
    let failuresLeft = 3;
    const relay = functionRelay(async (message: Envelope) => {
      if ((message.payload as { n: number }).n === 5 && failuresLeft > 0) {
        failuresLeft -= 1;
        throw new Error('not yet');
      }
      deliveries.push(message.id);
    });
    const outboxer = newOutboxer({ relay, ordering: 'total', batchSize: 4, backoff: { min: 30, max: 30 } });
    await outboxer.migrate();
    const ids = await publishInTransaction(
      fixture,
      outboxer,
      Array.from({ length: 20 }, (_, n) => ({
        outbox: 'orders',
        payload: { n },
        groupKey: n % 2 === 0 ? `g${n}` : null,
      })),
    );
    await outboxer.start();
    try {
      await waitUntil(() => failuresLeft === 2, 10_000, 'the first failure');
      // While message 5 waits for its retry, nothing behind it is delivered, whatever its group.
      expect(deliveries).toEqual(ids.slice(0, 5));
      await waitUntil(() => deliveries.length === 20, 20_000, 'everything');
      expect(deliveries).toEqual(ids);
    } finally {
      await outboxer.stop();
    }
  });

  test("'none' ordering: a failing message blocks nothing", async () => {
    const deliveries: number[] = [];
    const relay = functionRelay(async (message: Envelope) => {
      if ((message.payload as { n: number }).n === 0) throw new Error('always');
      deliveries.push(message.id);
    });
    const outboxer = newOutboxer({
      relay,
      ordering: 'none',
      partitions: 2,
      backoff: { min: 1000, max: 1000 },
    });
    await outboxer.migrate();
    const ids = await publishInTransaction(
      fixture,
      outboxer,
      Array.from({ length: 30 }, (_, n) => ({ outbox: 'orders', payload: { n }, groupKey: 'same' })),
    );
    await outboxer.start();
    try {
      await waitUntil(() => deliveries.length === 29, 10_000, 'the other messages');
      expect(new Set(deliveries)).toEqual(new Set(ids.slice(1)));
    } finally {
      await outboxer.stop();
    }
  });

  test('within a batch, nothing after a failed message of its group counts as delivered, whatever the relay reports', async () => {
    const batches: number[][] = [];
    const relay = batchRelay(async (batch) => {
      batches.push(batch.map((m) => m.id));
      // A misbehaving relay: fails the first message of group a, claims the rest were delivered.
      return batch.map((m, i) =>
        i === 0 ? { ok: false as const, error: new Error('first fails') } : { ok: true as const },
      );
    });
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { orders: { relay, table: `ordering_batch_${name}`, maxAttempts: Infinity } },
      testing: 'manual',
    });
    await outboxer.migrate();
    const ids = await publishInTransaction(fixture, outboxer, [
      { outbox: 'orders', payload: 1, groupKey: 'a' },
      { outbox: 'orders', payload: 2, groupKey: 'a' },
      { outbox: 'orders', payload: 3, groupKey: 'b' },
      { outbox: 'orders', payload: 4, groupKey: 'a' },
    ]);
    const result = await outboxer.drain('orders', { maxRounds: 1 });
    expect(result.delivered.map((m) => m.id)).toEqual([ids[2]]);
    expect(result.retried.map((r) => r.envelope.id)).toEqual([ids[0]]);
    const pending = await outboxer.listPending('orders');
    expect(pending.map((m) => [m.id, m.attempts])).toEqual([
      [ids[0], 1],
      [ids[1], 0],
      [ids[3], 0],
    ]);
    await outboxer.close();
  });

  test('retention { keep }: delivered rows are kept and counted, then pruned; dead rows are never pruned', async () => {
    let fail = true;
    const relay = functionRelay(async (message: Envelope) => {
      if ((message.payload as { dead?: boolean }).dead && fail) throw new Error('dead on arrival');
    });
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { orders: { relay, table: `ordering_keep_${name}`, retention: { keep: 0 }, maxAttempts: 1 } },
      testing: 'manual',
    });
    await outboxer.migrate();
    await publishInTransaction(fixture, outboxer, [
      ...Array.from({ length: 25 }, (_, n) => ({ outbox: 'orders', payload: { n }, groupKey: `g${n % 3}` })),
      { outbox: 'orders', payload: { dead: true }, groupKey: 'g0' },
    ]);
    await outboxer.drain('orders');
    expect(await outboxer.counts('orders')).toMatchObject({ pending: 0, delivered: 25, dead: 1 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await outboxer.prune('orders')).toBe(25);
    expect(await outboxer.counts('orders')).toMatchObject({ pending: 0, delivered: 0, dead: 1 });
    fail = false;
    await outboxer.close();
  });
});

reportSkippedFixtures('ordering');
