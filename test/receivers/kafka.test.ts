/**
 * The Kafka receivers against the real broker, with Postgres behind them: our Kafka relay writes
 * the records, a @platformatic/kafka or kafkajs consumer group reads them through the receiver.
 * A transaction that fails at commit leaves its record unacknowledged (the group's committed
 * offset stops right at it, nothing later in its partition is handled) and a restarted consumer
 * handles it; the whole topic read again (offsets reset) has no second effect; the effects of each
 * group are in publish order; with `store: true`, each record is acknowledged once stored and the
 * inbox processes them later. @platformatic/kafka runs once per installed major (2.x, and 1.x as
 * platformatic-kafka-v1), the receiver being structural.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { Outboxer, channels } from 'outboxer';
import {
  kafkaRelay,
  kafkajsReceiver,
  platformaticProducer,
  platformaticReceiver,
  type KafkaReceiverOptions,
} from 'outboxer/kafka';
import { nodePostgres, type PgTransactionClient } from 'outboxer/pg';
import { postgresFixture } from '../support/databases.js';
import { waitUntil } from '../support/random.js';
import {
  BOOTSTRAP,
  randomName,
  runnableLines,
  skipUnsupportedLines,
  topicAdmin,
  type PlatformaticKafka,
} from '../relays/kafka-support.js';
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

/** The options a test gives a receiver; the client's own message type is left to each client. */
type Options = Omit<KafkaReceiverOptions<never, PgTransactionClient, false>, 'handler'> & {
  handler?: (
    message: { id: string; groupKey: string | null; payload: unknown; partition: number; offset: string },
    tx: PgTransactionClient,
  ) => Promise<void>;
};

/** A running consumer group member that passes every record to the receiver. */
interface Running {
  /** Errors the receiver threw (platformatic: the loop stops at the first, as an application's does). */
  readonly errors: unknown[];
  stop(): Promise<void>;
}

/** A consumer of one @platformatic/kafka major whose loop ends at the first error, as an application's. */
function platformaticClient(name: string, kafka: PlatformaticKafka) {
  return {
    name,
    consume: async (topic: string, groupId: string, options: Options): Promise<Running> => {
      const consumer = new kafka.Consumer({
        groupId,
        clientId: 'outboxer-receiver-test',
        bootstrapBrokers: [BOOTSTRAP],
      });
      const stream = await consumer.consume({
        topics: [topic],
        mode: 'committed',
        fallbackMode: 'earliest',
        autocommit: false,
        maxWaitTime: 200,
      });
      const receive = platformaticReceiver(options as never);
      const errors: unknown[] = [];
      const loop = (async () => {
        try {
          for await (const message of stream) await receive(message);
        } catch (error) {
          errors.push(error); // the application's loop ends; it consumes again later
        }
      })();
      return {
        errors,
        async stop() {
          await stream.close();
          await loop;
          await consumer.close();
        },
      };
    },
  };
}

const clients: Array<{
  name: string;
  consume: (topic: string, group: string, options: Options) => Promise<Running>;
}> = [
  ...runnableLines.map((line) => platformaticClient(line.name, line.kafka)),
  {
    name: 'kafkajs',
    consume: async (topic, groupId, options) => {
      const kafka = new Kafka({
        clientId: 'outboxer-receiver-test',
        brokers: [BOOTSTRAP],
        logLevel: logLevel.NOTHING,
      });
      const consumer = kafka.consumer({ groupId, retry: { initialRetryTime: 50, retries: 1000 } });
      await consumer.connect();
      await consumer.subscribe({ topics: [topic], fromBeginning: true });
      const errors: unknown[] = [];
      const receive = kafkajsReceiver(options as never);
      // Commit each resolved offset at once: a check of the committed offsets then sees everything
      // the receiver let kafkajs resolve.
      await consumer.run({
        autoCommitThreshold: 1,
        eachMessage: async (payload) => {
          try {
            await receive(payload);
          } catch (error) {
            errors.push(error);
            throw error; // kafkajs does not resolve the offset and delivers the message again
          }
        },
      });
      return { errors, stop: () => consumer.disconnect() };
    },
  },
];

let fixture: PostgresFixture;
let consumer: Awaited<ReturnType<typeof consumerOf>>;
let runner: ReturnType<typeof pgRunner>;
const { createTopic } = topicAdmin();
const { Admin, Producer } = runnableLines[0]!.kafka;
const admin = new Admin({ clientId: 'outboxer-receiver-test-admin', bootstrapBrokers: [BOOTSTRAP] });
const producer = new Producer({
  clientId: 'outboxer-receiver-test',
  bootstrapBrokers: [BOOTSTRAP],
  idempotent: true,
});
let duplicates = 0;
const countDuplicate = (event: unknown) => {
  if ((event as { inbox: string }).inbox === 'kafka') duplicates += 1;
};

beforeAll(async () => {
  fixture = await postgresFixture();
  consumer = await consumerOf(fixture, 'kafka');
  subscribe(channels.inboxDuplicate.name, countDuplicate);
});
afterAll(async () => {
  unsubscribe(channels.inboxDuplicate.name, countDuplicate);
  await consumer.outboxer.close();
  await producer.close();
  await admin.close();
  await fixture.close();
});
beforeEach(async () => {
  await clear(fixture);
  runner = pgRunner(fixture.pool);
  duplicates = 0;
});

/** Sum of the group's committed offsets over the topic's partitions: how many records it acknowledged. */
async function acknowledged(group: string, topic: string): Promise<Map<number, bigint>> {
  const [found] = await admin.listConsumerGroupOffsets({ groups: [group] });
  const partitions = found?.topics.find((t) => t.name === topic)?.partitions ?? [];
  return new Map(
    partitions.filter((p) => p.committedOffset >= 0n).map((p) => [p.partitionIndex, p.committedOffset]),
  );
}
const total = (offsets: Map<number, bigint>): number =>
  [...offsets.values()].reduce((a, b) => a + Number(b), 0);
const untilAcknowledged = (group: string, topic: string, count: number, what: string) =>
  waitUntil(async () => total(await acknowledged(group, topic)) === count, 30_000, what);

const published = orderSteps(9, 3);

/** A topic of 3 partitions filled by the relay with `published`, through the outbox in `table`. */
async function relayed(table: string): Promise<{ topic: string; ids: string[] }> {
  const topic = await createTopic(3);
  const outboxer = new Outboxer({
    database: nodePostgres(fixture.pool),
    testing: 'manual',
    logger: false,
    outboxes: { orders: { table, relay: kafkaRelay({ producer: platformaticProducer(producer), topic }) } },
  });
  await outboxer.migrate();
  const ids = (await fixture.transaction((tx) => outboxer.publishMany(tx, published))).map(String);
  expect((await outboxer.drain('orders')).pending).toBe(0);
  await outboxer.close();
  return { topic, ids };
}

skipUnsupportedLines('the Kafka receiver');

describe.each(clients)('the Kafka receiver with $name', ({ name, consume }) => {
  test('a failed commit is not acknowledged; each record has one effect, in order, read twice', async () => {
    const { topic, ids } = await relayed(`kafka_${name.replace(/\W/g, '')}`);

    // The 5th message (the second of order:1) fails at commit, every time, until `failing` is cleared.
    const failing = { id: ids[4]!, partition: -1, offset: '', attempts: 0 };
    let failingOn = true;
    const options: Options = {
      outboxer: consumer.outboxer,
      inbox: 'kafka',
      transaction: runner.transaction,
      handler: async (message, tx) => {
        await recordEffect(tx, message.id, message.groupKey, message.payload);
        if (message.id === failing.id && failingOn) {
          failing.partition = message.partition;
          failing.offset = message.offset;
          failing.attempts += 1;
          runner.failCommit = true;
        }
      },
    };
    const group = randomName('outboxer-receiver');

    const first = await consume(topic, group, options);
    // kafkajs delivers the failed message again by itself; the platformatic loop ends at the error.
    await waitUntil(
      () => failing.attempts >= (name === 'kafkajs' ? 2 : 1) && first.errors.length > 0,
      30_000,
      'the failure',
    );
    await first.stop();
    expect(String(first.errors[0])).toContain('the commit failed');
    const handled = await effects(fixture);
    expect(handled.map((r) => r.message_id)).not.toContain(failing.id);
    expect(handled.filter((r) => r.group_key === 'order:1').map((r) => r.message_id)).toEqual([ids[1]]);
    // Acknowledged up to the failed record and not past it.
    const committed = await acknowledged(group, topic);
    expect(committed.get(failing.partition)).toBe(BigInt(failing.offset));

    failingOn = false;
    const second = await consume(topic, group, options);
    await untilAcknowledged(group, topic, ids.length, 'every record acknowledged');
    await second.stop();
    expect(second.errors).toEqual([]);
    const once = await effects(fixture);
    expectOncePerMessageInGroupOrder(once, ids, published);
    expect(once[0]!.payload).toEqual({ n: Number(ids.indexOf(once[0]!.message_id)) });

    // The whole topic read again, as after an offset reset: every record a duplicate, no effect.
    await admin.alterConsumerGroupOffsets({
      groupId: group,
      topics: [{ name: topic, partitionOffsets: [0, 1, 2].map((partition) => ({ partition, offset: 0n })) }],
    });
    duplicates = 0;
    const third = await consume(topic, group, options);
    await waitUntil(() => duplicates === ids.length, 30_000, 'every record seen again');
    await untilAcknowledged(group, topic, ids.length, 'acknowledged again');
    await third.stop();
    expect(third.errors).toEqual([]);
    expect((await effects(fixture)).map((r) => r.message_id)).toEqual(once.map((r) => r.message_id));
  });

  test('store: true acknowledges each record once stored; the inbox processes them later, in order', async () => {
    const suffix = name.replace(/\W/g, '');
    const { topic, ids } = await relayed(`kafka_stored_${suffix}`);
    const inbox = `kafkaStored_${suffix}`;
    const stored = await storingConsumerOf(fixture, runner, inbox);
    const options: Options = { outboxer: stored, inbox, transaction: runner.transaction, store: true };
    const group = randomName('outboxer-receiver');
    runner.failCommit = true; // the first store's commit fails: that record is not acknowledged

    const first = await consume(topic, group, options);
    await waitUntil(() => first.errors.length > 0, 30_000, 'the failure');
    await first.stop();
    expect(String(first.errors[0])).toContain('the commit failed');
    const second = await consume(topic, group, options);
    await untilAcknowledged(group, topic, ids.length, 'every record acknowledged');
    await second.stop();
    expect(second.errors).toEqual([]);
    await expectStoredThenProcessed(fixture, stored, inbox, ids, published);
  });
});

describe('identity', () => {
  test('a record without an outboxer-id is refused, unacknowledged, unless an id function names it', async () => {
    const topic = await createTopic(1);
    await producer.send({
      messages: [
        {
          topic,
          key: Buffer.from('k'),
          value: Buffer.from('{"foreign":true}'),
          headers: new Map([[Buffer.from('trace'), Buffer.from('t-1')]]),
        },
      ],
      acks: -1,
    });
    const group = randomName('outboxer-receiver');
    const handlerOptions = {
      outboxer: consumer.outboxer,
      inbox: 'kafka',
      transaction: runner.transaction,
      handler: async (
        message: { id: string; groupKey: string | null; payload: unknown },
        tx: PgTransactionClient,
      ) => recordEffect(tx, message.id, message.groupKey, message.payload),
    };
    const refused = await clients[0]!.consume(topic, group, handlerOptions);
    await waitUntil(() => refused.errors.length > 0, 30_000, 'the refusal');
    await refused.stop();
    expect(refused.errors[0]).toMatchObject({ name: 'MissingMessageIdError', code: 'INVALID_MESSAGE' });
    expect(total(await acknowledged(group, topic))).toBe(0);
    expect(await effects(fixture)).toEqual([]);

    const named = await clients[0]!.consume(topic, group, {
      ...handlerOptions,
      id: (raw: unknown) => `${(raw as { topic: string }).topic}@${(raw as { offset: bigint }).offset}`,
    } as Options);
    await untilAcknowledged(group, topic, 1, 'the record acknowledged');
    await named.stop();
    expect(await effects(fixture)).toEqual([
      { message_id: `${topic}@0`, group_key: null, payload: { foreign: true } },
    ]);
  });
});
