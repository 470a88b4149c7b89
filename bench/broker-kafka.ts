/**
 * Kafka rows: a fresh topic of 4 partitions per arm on the local broker (127.0.0.1:9092), created
 * and deleted with a kafkajs admin. Both arms use an idempotent producer with `acks: -1`, one send
 * in flight per producer (the relay's lane, which both JS clients need for idempotent sends), each
 * record's partition chosen from its key with the Java client's murmur2, as the relay does.
 * The rows with a round trip reach the broker through {@link delayedLink}, both arms alike: a
 * broker across a network, where one send in flight makes the round trip the limit.
 */
import net from 'node:net';
import { Producer } from '@platformatic/kafka';
import { Kafka, logLevel, type Admin } from 'kafkajs';
import { javaPartition, kafkaRelay, kafkajsProducer, platformaticProducer } from 'outboxer/kafka';
import {
  randomSuffix,
  type BenchMessage,
  type BrokerTarget,
  type Destination,
} from './broker-destination.js';
import { delayedLink, type DelayedLink } from './link-delay.js';

const BROKER = { host: '127.0.0.1', port: 9092 };
const BOOTSTRAP = `${BROKER.host}:${BROKER.port}`;
/** The round trip of the rows across a network: a broker in another zone of a cloud region, about. */
const ROUND_TRIP_MS = 10;
const TOPIC_PARTITIONS = 4;
const PARTITIONS = 4;
const BATCH = 500;

interface Record {
  readonly partition: number;
  readonly key: Buffer;
  readonly value: Buffer;
  readonly headers: Readonly<{ [name: string]: string }>;
}

function records(batch: readonly BenchMessage[]): Record[] {
  return batch.map((m) => {
    const key = Buffer.from(m.groupKey);
    return {
      partition: javaPartition(key, TOPIC_PARTITIONS),
      key,
      value: Buffer.from(JSON.stringify(m.payload)),
      headers: m.headers,
    };
  });
}

/** A fresh topic through a kafkajs admin; `close()` deletes it. */
async function freshTopic(): Promise<{ topic: string; admin: Admin; kafka: Kafka; drop(): Promise<void> }> {
  const kafka = new Kafka({ clientId: 'outboxer-bench', brokers: [BOOTSTRAP], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const topic = `outboxer-bench-${randomSuffix()}`;
  await admin.createTopics({ topics: [{ topic, numPartitions: TOPIC_PARTITIONS }], waitForLeaders: true });
  return {
    topic,
    admin,
    kafka,
    async drop() {
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
      await admin.disconnect();
    },
  };
}

async function held(admin: Admin, topic: string): Promise<number> {
  const offsets = await admin.fetchTopicOffsets(topic);
  return offsets.reduce((sum, o) => sum + Number(o.high) - Number(o.low), 0);
}

/** The link of a row with a round trip, or none. */
async function linkOf(roundTripMs: number): Promise<DelayedLink | undefined> {
  return roundTripMs > 0 ? delayedLink(BROKER, roundTripMs / 2) : undefined;
}

/**
 * Makes a @platformatic/kafka producer open every broker connection through the link: the client
 * connects to the address the broker advertises, so a link given only as the bootstrap address
 * would be bypassed. (Its connection pool is not public API; the relay tests route it the same way.)
 */
function routeThrough(producer: Producer, port: number): void {
  type Broker = { host: string; port: number };
  const pool = (producer as unknown as { connections: unknown }).connections as {
    get(broker: Broker, callback?: unknown): unknown;
    getFirstAvailable(brokers: Broker[], callback?: unknown): unknown;
  };
  const viaLink = (broker: Broker): Broker => ({ ...broker, host: BROKER.host, port });
  const get = pool.get.bind(pool);
  const getFirstAvailable = pool.getFirstAvailable.bind(pool);
  pool.get = (broker, callback) => get(viaLink(broker), callback);
  pool.getFirstAvailable = (brokers, callback) => getFirstAvailable(brokers.map(viaLink), callback);
}

async function platformatic(roundTripMs: number): Promise<Destination<Array<{ [k: string]: unknown }>>> {
  const fresh = await freshTopic();
  const link = await linkOf(roundTripMs);
  const producer = new Producer({
    clientId: 'outboxer-bench',
    bootstrapBrokers: [link === undefined ? BOOTSTRAP : `${BROKER.host}:${link.port}`],
    idempotent: true,
  });
  if (link !== undefined) routeThrough(producer, link.port);
  return {
    relay: () => kafkaRelay({ producer: platformaticProducer(producer), topic: fresh.topic }),
    encode: (batch) =>
      records(batch).map((r) => ({
        topic: fresh.topic,
        partition: r.partition,
        key: r.key,
        value: r.value,
        headers: new Map(Object.entries(r.headers).map(([k, v]) => [Buffer.from(k), Buffer.from(v)])),
      })),
    async send(messages) {
      await producer.send({
        messages: messages as never,
        acks: -1,
        idempotent: true,
        autocreateTopics: false,
      });
    },
    received: () => held(fresh.admin, fresh.topic),
    async close() {
      await producer.close();
      await link?.close();
      await fresh.drop();
    },
  };
}

async function kafkajs(roundTripMs: number): Promise<Destination<Array<{ [k: string]: unknown }>>> {
  const fresh = await freshTopic();
  const link = await linkOf(roundTripMs);
  const kafka =
    link === undefined
      ? fresh.kafka
      : new Kafka({
          clientId: 'outboxer-bench',
          brokers: [BOOTSTRAP],
          logLevel: logLevel.NOTHING,
          socketFactory: ({ onConnect }) => net.connect({ host: BROKER.host, port: link.port }, onConnect),
        });
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
  });
  await producer.connect();
  return {
    relay: () =>
      kafkaRelay({ producer: kafkajsProducer(producer, { admin: fresh.admin }), topic: fresh.topic }),
    encode: (batch) =>
      records(batch).map((r) => ({
        key: r.key,
        value: r.value,
        headers: { ...r.headers },
        partition: r.partition,
      })),
    async send(messages) {
      await producer.sendBatch({
        topicMessages: [{ topic: fresh.topic, messages: messages as never }],
        acks: -1,
      });
    },
    received: () => held(fresh.admin, fresh.topic),
    async close() {
      await producer.disconnect();
      await link?.close();
      await fresh.drop();
    },
  };
}

export function kafkaTargets(): BrokerTarget[] {
  const settings = `a topic of ${TOPIC_PARTITIONS} partitions on one broker, idempotent producer, \`acks: -1\`, one send in flight per producer (the relay's lane, shared by its partitions: a partition's time in \`deliver\` includes its wait for the lane)`;
  const kafkajsSends =
    "the relay sends one topic-partition per sendBatch (kafkajs cannot say which partitions of a failed request were written), combining the partitions' batches waiting for the lane, the client alone all partitions in one";
  const across = `; both arms through a proxy that delays every chunk ${ROUND_TRIP_MS / 2} ms each way (a ${ROUND_TRIP_MS} ms round trip)`;
  return [0, ROUND_TRIP_MS].flatMap((roundTripMs) => {
    const link = roundTripMs === 0 ? '' : `, ${roundTripMs} ms round trip`;
    const note = roundTripMs === 0 ? '' : across;
    return [
      {
        what: `Kafka (@platformatic/kafka${link})`,
        limitLabel: `Producer.send of ${BATCH} records, acks -1, idempotent, one at a time`,
        partitions: PARTITIONS,
        batchSize: BATCH,
        serialSends: true,
        settings: `${settings}${note}`,
        open: () => platformatic(roundTripMs),
      },
      {
        what: `Kafka (kafkajs${link})`,
        limitLabel: `producer.sendBatch of ${BATCH} records, acks -1, idempotent, one at a time`,
        partitions: PARTITIONS,
        batchSize: BATCH,
        serialSends: true,
        settings: `${settings}; ${kafkajsSends}${note}`,
        open: () => kafkajs(roundTripMs),
      },
    ];
  });
}
