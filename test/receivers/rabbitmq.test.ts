/**
 * The RabbitMQ receiver against the real broker (127.0.0.1:5672), with Postgres behind it: our
 * RabbitMQ relay publishes to an exchange, a consumer reads the bound queue through the receiver.
 * Each delivery is acked after its commit only; a commit that fails is nacked and requeued, and
 * the deliveries of its group waiting behind it with it, so each group's effects stay in publish
 * order; deliveries whose acks never reached the broker (the consumer's channel closed first)
 * come back and have no second effect; with `store: true`, each is acked once stored and the inbox
 * processes them later.
 */
import amqp, { type Channel, type ChannelModel, type ConsumeMessage } from 'amqplib';
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { Outboxer } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { rabbitmqReceiver, rabbitmqRelay } from 'outboxer/rabbitmq';
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

const URL = 'amqp://guest:guest@127.0.0.1:5672';
const random = () => Math.random().toString(36).slice(2, 10);

let fixture: PostgresFixture;
let consumer: Awaited<ReturnType<typeof consumerOf>>;
let runner: ReturnType<typeof pgRunner>;
let connection: ChannelModel;

beforeAll(async () => {
  fixture = await postgresFixture();
  consumer = await consumerOf(fixture, 'rabbitmq');
  connection = await amqp.connect(URL);
});
afterAll(async () => {
  await connection.close();
  await consumer.outboxer.close();
  await fixture.close();
});
beforeEach(async () => {
  await clear(fixture);
  runner = pgRunner(fixture.pool);
});

const published = orderSteps(8, 2);

/** A topic exchange and a queue bound to all of it, filled by the relay with `published`. */
async function relayed(table: string): Promise<{ queue: string; ids: string[]; remove(): Promise<void> }> {
  const exchange = `outboxer-receiver-${random()}`;
  const queue = `${exchange}-q`;
  const setup = await connection.createChannel();
  await setup.assertExchange(exchange, 'topic', { durable: false });
  await setup.assertQueue(queue, { durable: false });
  await setup.bindQueue(queue, exchange, '#');
  const producer = new Outboxer({
    database: nodePostgres(fixture.pool),
    testing: 'manual',
    logger: false,
    outboxes: { orders: { table, relay: rabbitmqRelay({ connection, exchange }) } },
  });
  await producer.migrate();
  const ids = (await fixture.transaction((tx) => producer.publishMany(tx, published))).map(String);
  expect((await producer.drain('orders')).pending).toBe(0);
  await producer.close();
  return {
    queue,
    ids,
    async remove() {
      await setup.deleteQueue(queue);
      await setup.deleteExchange(exchange);
      await setup.close();
    },
  };
}

async function messagesIn(queue: string): Promise<number> {
  const channel = await connection.createChannel();
  const { messageCount } = await channel.checkQueue(queue);
  await channel.close();
  return messageCount;
}

test('acked after the commit only; a failed commit is requeued with its group behind it, in order', async () => {
  const { queue, ids, remove } = await relayed('rabbit_fail');
  const failing = ids[2]!; // order:0's second
  const events: string[] = [];
  const handling = new WeakMap<object, string>();
  const channel = await connection.createChannel();
  await channel.prefetch(20); // everything in flight at once: the order is the receiver's doing
  const idOf = (message: ConsumeMessage) => String(message.properties.headers?.['outboxer-id']);
  const watched = {
    ack: (message: ConsumeMessage) => (events.push(`ack ${idOf(message)}`), channel.ack(message)),
    nack: (message: ConsumeMessage, allUpTo?: boolean, requeue?: boolean) => (
      events.push(`nack ${idOf(message)}`),
      channel.nack(message, allUpTo, requeue)
    ),
  };
  const receive = rabbitmqReceiver({
    outboxer: consumer.outboxer,
    inbox: 'rabbitmq',
    channel: watched,
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
  const { consumerTag } = await channel.consume(queue, receive);
  await waitUntil(async () => (await effects(fixture)).length === ids.length, 30_000, 'every effect');
  await waitUntil(() => ids.every((id) => events.includes(`ack ${id}`)), 30_000, 'every ack');
  await channel.cancel(consumerTag);
  await channel.close();

  expectOncePerMessageInGroupOrder(await effects(fixture), ids, published);
  for (const id of ids) {
    const mine = events.filter((e) => e.endsWith(` ${id}`));
    expect(
      mine.filter((e) => e.startsWith('ack')),
      id,
    ).toHaveLength(1);
    expect(mine.indexOf(`ack ${id}`)).toBeGreaterThan(mine.indexOf(`commit ${id}`));
    expect(mine.indexOf(`commit ${id}`)).toBeGreaterThanOrEqual(0);
  }
  const failed = events.filter((e) => e.endsWith(` ${failing}`));
  expect(failed.slice(0, 2)).toEqual([`failed ${failing}`, `nack ${failing}`]);
  expect(failed.slice(-2)).toEqual([`commit ${failing}`, `ack ${failing}`]);
  expect(
    consumer.logger.lines.some((l) => l.level === 'error' && JSON.stringify(l).includes('the commit failed')),
  ).toBe(true);
  expect(await messagesIn(queue)).toBe(0);
  await remove();
});

test('deliveries whose acks were lost come back and have no second effect', async () => {
  const { queue, ids, remove } = await relayed('rabbit_lost');
  const options = {
    outboxer: consumer.outboxer,
    inbox: 'rabbitmq',
    transaction: runner.transaction,
    handler: async (
      message: { id: string; groupKey: string | null; payload: unknown },
      tx: Parameters<typeof recordEffect>[0],
    ) => recordEffect(tx, message.id, message.groupKey, message.payload),
  };
  // The first consumer handles everything but its acks never reach the broker: its channel closes first.
  const first: Channel = await connection.createChannel();
  const lost = rabbitmqReceiver({ ...options, channel: { ack: () => undefined, nack: () => undefined } });
  await first.consume(queue, lost);
  await waitUntil(async () => (await effects(fixture)).length === ids.length, 30_000, 'every effect');
  await first.close(); // the broker requeues every unacked delivery

  const second = await connection.createChannel();
  const redelivered: ConsumeMessage[] = [];
  const receive = rabbitmqReceiver({ ...options, channel: second });
  const outcomes: unknown[] = [];
  await second.consume(queue, async (message) => {
    if (message !== null) redelivered.push(message);
    outcomes.push(await receive(message));
  });
  await waitUntil(() => outcomes.length === ids.length, 30_000, 'every redelivery');
  await waitUntil(async () => (await messagesIn(queue)) === 0, 30_000, 'the queue acked empty');
  await second.close();

  expect(redelivered.every((m) => m.fields.redelivered)).toBe(true);
  expect(outcomes).toEqual(
    ids.map(() => ({ status: 'fulfilled', value: expect.objectContaining({ duplicate: true }) })),
  );
  expectOncePerMessageInGroupOrder(await effects(fixture), ids, published);
  await remove();
});

test('store: true acks each delivery once stored; the inbox processes them later, once each, in group order', async () => {
  const { queue, ids, remove } = await relayed('rabbit_stored');
  const stored = await storingConsumerOf(fixture, runner, 'rabbitmqStored');
  const channel = await connection.createChannel();
  await channel.prefetch(20);
  const acked: ConsumeMessage[] = [];
  const requeued: ConsumeMessage[] = [];
  runner.failCommit = true; // the first store's commit fails: that delivery is requeued, stored when it comes back
  const receive = rabbitmqReceiver({
    outboxer: stored,
    inbox: 'rabbitmqStored',
    channel: {
      ack: (message) => (acked.push(message), channel.ack(message)),
      nack: (message, allUpTo, requeue) => (requeued.push(message), channel.nack(message, allUpTo, requeue)),
    },
    transaction: runner.transaction,
    store: true,
  });
  const { consumerTag } = await channel.consume(queue, receive);
  await waitUntil(() => acked.length === ids.length, 30_000, 'every delivery acked');
  await channel.cancel(consumerTag);
  await channel.close();
  expect(requeued.length).toBeGreaterThan(0);
  expect(await messagesIn(queue)).toBe(0);
  await expectStoredThenProcessed(fixture, stored, 'rabbitmqStored', ids, published);
  await remove();
});
