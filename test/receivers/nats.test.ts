/**
 * The NATS JetStream receiver against the real server (127.0.0.1:4222), with Postgres behind it:
 * our NATS relay publishes to a stream, a durable consumer with explicit acks reads it through the
 * receiver, messages handled concurrently. Each message is acked after its commit only; a commit
 * that fails is nak'ed and handled at its redelivery, its group's later messages nak'ed behind it,
 * so each group's effects stay in publish order; messages whose acks never reached the server
 * (ack wait expired) come back and have no second effect; with `store: true`, each is acked once
 * stored and the inbox processes them later.
 */
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import {
  AckPolicy,
  jetstream,
  jetstreamManager,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { Outboxer } from 'outboxer';
import { natsReceiver, natsRelay, type JetStreamMessageLike } from 'outboxer/nats';
import { nodePostgres } from 'outboxer/pg';
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

let fixture: PostgresFixture;
let consumer: Awaited<ReturnType<typeof consumerOf>>;
let runner: ReturnType<typeof pgRunner>;
let nc: NatsConnection;
let jsm: JetStreamManager;
const streams: string[] = [];

beforeAll(async () => {
  fixture = await postgresFixture();
  consumer = await consumerOf(fixture, 'nats');
  nc = await connect({ servers: '127.0.0.1:4222' });
  jsm = await jetstreamManager(nc);
});
afterAll(async () => {
  for (const name of streams) await jsm.streams.delete(name).catch(() => undefined);
  await nc.close();
  await consumer.outboxer.close();
  await fixture.close();
});
beforeEach(async () => {
  await clear(fixture);
  runner = pgRunner(fixture.pool);
});

const published = orderSteps(8, 2);

/** A stream filled by the relay with `published`, and a durable consumer (1 s ack wait) on it. */
async function relayed(table: string) {
  const name = `OUTBOXER_RECEIVER_${random().toUpperCase()}`;
  const subject = `outboxer.${random()}`;
  await jsm.streams.add({ name, subjects: [`${subject}.>`] });
  streams.push(name);
  await jsm.consumers.add(name, {
    durable_name: 'shipping',
    ack_policy: AckPolicy.Explicit,
    ack_wait: 1_000_000_000, // nanoseconds
  });
  const producer = new Outboxer({
    database: nodePostgres(fixture.pool),
    testing: 'manual',
    logger: false,
    outboxes: {
      orders: {
        table,
        relay: natsRelay({ jetstream: jetstream(nc), createHeaders: headers, subject: `${subject}.events` }),
      },
    },
  });
  await producer.migrate();
  const ids = (await fixture.transaction((tx) => producer.publishMany(tx, published))).map(String);
  expect((await producer.drain('orders')).pending).toBe(0);
  await producer.close();
  return { name, ids };
}

/** Reads the consumer, passing each message to `onMessage` without waiting for it, until stopped. */
async function consume(stream: string, onMessage: (message: JsMsg) => void) {
  const messages = await (await jetstream(nc).consumers.get(stream, 'shipping')).consume({ expires: 1000 });
  const reading = (async () => {
    for await (const message of messages) onMessage(message);
  })();
  return {
    async stop() {
      await messages.close();
      await reading;
    },
  };
}

const options = () => ({
  outboxer: consumer.outboxer,
  inbox: 'nats',
  transaction: runner.transaction,
  handler: async (
    message: { id: string; groupKey: string | null; payload: unknown },
    tx: Parameters<typeof recordEffect>[0],
  ) => recordEffect(tx, message.id, message.groupKey, message.payload),
});

test('acked after the commit only; a failed commit is nak’ed with its group behind it, in order', async () => {
  const { name, ids } = await relayed('nats_fail');
  const failing = ids[2]!; // order:0's second
  const events: string[] = [];
  const handling = new WeakMap<object, string>();
  const receive = natsReceiver({
    ...options(),
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
  const watched = (message: JsMsg): JetStreamMessageLike => {
    const id = message.headers!.get('outboxer-id');
    return {
      subject: message.subject,
      data: message.data,
      headers: message.headers,
      ack: () => (events.push(`ack ${id}`), message.ack()),
      nak: (delay) => (events.push(`nak ${id}`), message.nak(delay)),
    };
  };
  const reader = await consume(name, (message) => void receive(watched(message)));
  await waitUntil(() => ids.every((id) => events.includes(`ack ${id}`)), 30_000, 'every ack');
  await reader.stop();

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
  expect(failed.slice(0, 2)).toEqual([`failed ${failing}`, `nak ${failing}`]);
  expect(failed.slice(-2)).toEqual([`commit ${failing}`, `ack ${failing}`]);
  const info = await jsm.consumers.info(name, 'shipping');
  expect(info.num_ack_pending + info.num_pending).toBe(0);
});

test('messages whose acks never reached the server come back and have no second effect', async () => {
  const { name, ids } = await relayed('nats_lost');
  // The first reader handles everything, but its acks are lost: the server delivers again after 1 s.
  const lost = natsReceiver(options());
  const handledOnce: string[] = [];
  const first = await consume(name, (message) => {
    handledOnce.push(message.headers!.get('outboxer-id'));
    void lost({
      subject: message.subject,
      data: message.data,
      headers: message.headers,
      ack: () => {},
      nak: () => {},
    });
  });
  await waitUntil(async () => (await effects(fixture)).length === ids.length, 30_000, 'every effect');
  await first.stop();

  const receive = natsReceiver(options());
  const outcomes: Array<PromiseSettledResult<unknown>> = [];
  const second = await consume(
    name,
    (message) => void receive(message).then((outcome) => outcomes.push(outcome)),
  );
  await waitUntil(() => outcomes.length >= ids.length, 30_000, 'every redelivery');
  await waitUntil(
    async () => (await jsm.consumers.info(name, 'shipping')).num_ack_pending === 0,
    30_000,
    'acked',
  );
  await second.stop();

  expect(
    outcomes.every((o) => o.status === 'fulfilled' && (o.value as { duplicate: boolean }).duplicate),
  ).toBe(true);
  expectOncePerMessageInGroupOrder(await effects(fixture), ids, published);
});

test('store: true acks each message once stored; the inbox processes them later, once each, in group order', async () => {
  const { name, ids } = await relayed('nats_stored');
  const stored = await storingConsumerOf(fixture, runner, 'natsStored');
  runner.failCommit = true; // the first store's commit fails: that message is nak'ed, stored at its redelivery
  const receive = natsReceiver({
    outboxer: stored,
    inbox: 'natsStored',
    transaction: runner.transaction,
    store: true,
  });
  const errors: unknown[] = [];
  const reader = await consume(name, (message) => {
    void receive(message).then((outcome) => outcome.status === 'rejected' && errors.push(outcome.reason));
  });
  await waitUntil(
    async () => {
      const info = await jsm.consumers.info(name, 'shipping');
      return errors.length > 0 && info.num_ack_pending + info.num_pending === 0;
    },
    30_000,
    'every message acked',
  );
  await reader.stop();
  expect(String(errors[0])).toBe('Error: the commit failed');
  await expectStoredThenProcessed(fixture, stored, 'natsStored', ids, published);
});
