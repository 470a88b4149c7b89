/**
 * The Redis Streams receiver against the real server (127.0.0.1:6379), with Postgres behind it:
 * our relay XADDs to a stream, a consumer group reads it with XREADGROUP (its pending entries
 * first) through the receiver, entries handled concurrently. Each entry is XACKed after its commit
 * only; a commit that fails leaves the entry pending, with its group's later entries, and it is
 * handled when read again, so each group's effects stay in publish order; entries a consumer
 * handled but never acked (it died) are claimed by another and have no second effect; with
 * `store: true`, each is XACKed once stored and the inbox processes them later.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { Outboxer } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { redisStreamsReceiver, redisStreamsRelay, type RedisStreamEntry } from 'outboxer/redis-streams';
import { postgresFixture } from '../support/databases.js';
import { waitUntil } from '../support/random.js';
import {
  clear,
  consumerOf,
  effects,
  pgRunner,
  recordEffect,
  type PostgresFixture,
  orderSteps,
  expectOncePerMessageInGroupOrder,
  expectStoredThenProcessed,
  storingConsumerOf,
} from './support.js';

const random = () => Math.random().toString(36).slice(2, 10);
const GROUP = 'shipping';

let fixture: PostgresFixture;
let consumer: Awaited<ReturnType<typeof consumerOf>>;
let runner: ReturnType<typeof pgRunner>;
const redis = new Redis('redis://127.0.0.1:6379');
const keys: string[] = [];

beforeAll(async () => {
  fixture = await postgresFixture();
  consumer = await consumerOf(fixture, 'redis');
});
afterAll(async () => {
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
  await consumer.outboxer.close();
  await fixture.close();
});
beforeEach(async () => {
  await clear(fixture);
  runner = pgRunner(fixture.pool);
});

const published = orderSteps(8, 2);

/** A stream with the consumer group, filled by the relay with `published`. */
async function relayed(table: string): Promise<{ stream: string; ids: string[] }> {
  const stream = `outboxer:receiver:${random()}`;
  keys.push(stream);
  await redis.xgroup('CREATE', stream, GROUP, '0', 'MKSTREAM');
  const producer = new Outboxer({
    database: nodePostgres(fixture.pool),
    testing: 'manual',
    logger: false,
    outboxes: { orders: { table, relay: redisStreamsRelay({ redis, stream }) } },
  });
  await producer.migrate();
  const ids = (await fixture.transaction((tx) => producer.publishMany(tx, published))).map(String);
  expect((await producer.drain('orders')).pending).toBe(0);
  await producer.close();
  return { stream, ids };
}

/** One XREADGROUP of `consumerName`: its pending entries (`0`) or new ones (`>`). */
async function read(stream: string, consumerName: string, from: '0' | '>'): Promise<RedisStreamEntry[]> {
  const reply = (await redis.xreadgroup(
    'GROUP',
    GROUP,
    consumerName,
    'COUNT',
    100,
    'STREAMS',
    stream,
    from,
  )) as Array<[string, RedisStreamEntry[]]> | null;
  return reply?.[0]?.[1] ?? [];
}

async function pending(stream: string): Promise<number> {
  const [count] = (await redis.xpending(stream, GROUP)) as [number];
  return count;
}

const options = (stream: string) => ({
  outboxer: consumer.outboxer,
  inbox: 'redis',
  redis,
  stream,
  group: GROUP,
  transaction: runner.transaction,
  handler: async (
    message: { id: string; groupKey: string | null; payload: unknown },
    tx: Parameters<typeof recordEffect>[0],
  ) => recordEffect(tx, message.id, message.groupKey, message.payload),
});

test('XACKed after the commit only; a failed commit stays pending with its group behind it, in order', async () => {
  const { stream, ids } = await relayed('redis_fail');
  const failing = ids[2]!; // order:0's second
  const events: string[] = [];
  const handling = new WeakMap<object, string>();
  const watchedRedis = {
    pipeline: (commands: string[][]) => {
      for (const command of commands)
        if (command[0] === 'xack') events.push(`ack ${entryIds.get(command[3]!)}`);
      return redis.pipeline(commands);
    },
  };
  const entryIds = new Map<string, string>(); // stream entry id → outbox id
  const receive = redisStreamsReceiver({
    ...options(stream),
    redis: watchedRedis,
    transaction: async (work) => {
      let client: object | undefined;
      // A pooled client keeps no label of its last transaction.
      const result = await runner.transaction((tx) => (handling.delete(tx), work((client = tx))));
      if (handling.has(client!)) events.push(`commit ${handling.get(client!)}`);
      return result;
    },
    handler: async (message, tx) => {
      handling.set(tx, message.id);
      await recordEffect(tx, message.id, message.groupKey, message.payload);
      if (message.id === failing && !events.includes(`failed ${failing}`)) {
        events.push(`failed ${failing}`);
        runner.failCommitOf(tx); // this transaction only: others run at the same time
      }
    },
  });
  // An application's loop: its pending entries first, then new ones; a batch handled concurrently.
  let rounds = 0;
  while ((await effects(fixture)).length < ids.length || (await pending(stream)) > 0) {
    if (++rounds > 20) throw new Error('not done after 20 reads');
    const entries = [...(await read(stream, 'worker-1', '0')), ...(await read(stream, 'worker-1', '>'))];
    for (const [entryId, fields] of entries) entryIds.set(entryId, fields[fields.indexOf('id') + 1]!);
    await Promise.all(entries.map((entry) => receive(entry)));
  }

  expectOncePerMessageInGroupOrder(await effects(fixture), ids, published);
  for (const id of ids) {
    const mine = events.filter((e) => e.endsWith(` ${id}`));
    expect(
      mine.filter((e) => e.startsWith('ack')),
      id,
    ).toHaveLength(1);
    expect(mine.indexOf(`commit ${id}`), id).toBeGreaterThanOrEqual(0);
    expect(mine.indexOf(`ack ${id}`)).toBeGreaterThan(mine.indexOf(`commit ${id}`));
  }
  const failed = events.filter((e) => e.endsWith(` ${failing}`));
  expect(failed).toEqual([`failed ${failing}`, `commit ${failing}`, `ack ${failing}`]);
  expect(rounds).toBeGreaterThanOrEqual(2); // the failed entry and those behind it were read again
});

test('entries a consumer handled but never acked are claimed by another and have no second effect', async () => {
  const { stream, ids } = await relayed('redis_lost');
  // worker-1 handles everything, then dies before its XACKs: its entries stay pending.
  const dying = redisStreamsReceiver({
    ...options(stream),
    redis: { pipeline: () => ({ exec: async () => null }) },
  });
  await Promise.all((await read(stream, 'worker-1', '>')).map((entry) => dying(entry)));
  expect((await effects(fixture)).length).toBe(ids.length);
  expect(await pending(stream)).toBe(ids.length);

  const receive = redisStreamsReceiver(options(stream));
  const [, claimed] = (await redis.xautoclaim(stream, GROUP, 'worker-2', 0, '0', 'COUNT', 100)) as [
    string,
    RedisStreamEntry[],
  ];
  const outcomes = await Promise.all(claimed.map((entry) => receive(entry)));
  expect(outcomes).toEqual(
    ids.map(() => ({ status: 'fulfilled', value: expect.objectContaining({ duplicate: true }) })),
  );
  await waitUntil(async () => (await pending(stream)) === 0, 10_000, 'every entry acked');
  expectOncePerMessageInGroupOrder(await effects(fixture), ids, published);
});

test('store: true XACKs each entry once stored; the inbox processes them later, once each, in group order', async () => {
  const { stream, ids } = await relayed('redis_stored');
  const stored = await storingConsumerOf(fixture, runner, 'redisStored');
  runner.failCommit = true; // the first store's commit fails: that entry stays pending, stored when read again
  const receive = redisStreamsReceiver({
    outboxer: stored,
    inbox: 'redisStored',
    redis,
    stream,
    group: GROUP,
    transaction: runner.transaction,
    store: true,
  });
  const entriesRead = new Set<string>();
  const outcomes: Array<PromiseSettledResult<unknown>> = [];
  let rounds = 0;
  while (entriesRead.size < ids.length || (await pending(stream)) > 0) {
    if (++rounds > 20) throw new Error('not done after 20 reads');
    const entries = [...(await read(stream, 'worker-1', '0')), ...(await read(stream, 'worker-1', '>'))];
    for (const [entryId] of entries) entriesRead.add(entryId);
    outcomes.push(...(await Promise.all(entries.map((entry) => receive(entry)))));
  }
  // The failed entry, and its group's entries read with it, given back behind it.
  const [failure, ...behind] = outcomes.filter((o) => o.status === 'rejected').map((o) => String(o.reason));
  expect(failure).toBe('Error: the commit failed');
  for (const reason of behind)
    expect(reason).toMatch(/gave message \d+ back unhandled: message \d+ of its group/);
  await expectStoredThenProcessed(fixture, stored, 'redisStored', ids, published);
});
