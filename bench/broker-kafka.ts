/**
 * Kafka rows: a fresh topic of 4 partitions per arm on the local broker (127.0.0.1:9092), created
 * and deleted with a kafkajs admin. Both arms use an idempotent producer with `acks: -1`, one send
 * in flight per producer (the relay's lane, which both JS clients need for idempotent sends), each
 * record's partition chosen from its key with the Java client's murmur2, as the relay does.
 */
import { Producer } from '@platformatic/kafka';
import { Kafka, logLevel, type Admin } from 'kafkajs';
import { javaPartition, kafkaRelay, kafkajsProducer, platformaticProducer } from 'outboxer/kafka';
import {
  randomSuffix,
  type BenchMessage,
  type BrokerTarget,
  type Destination,
} from './broker-destination.js';

const BOOTSTRAP = '127.0.0.1:9092';
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

async function platformatic(): Promise<Destination<Array<{ [k: string]: unknown }>>> {
  const fresh = await freshTopic();
  const producer = new Producer({
    clientId: 'outboxer-bench',
    bootstrapBrokers: [BOOTSTRAP],
    idempotent: true,
  });
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
      await fresh.drop();
    },
  };
}

async function kafkajs(): Promise<Destination<Array<{ [k: string]: unknown }>>> {
  const fresh = await freshTopic();
  const producer = fresh.kafka.producer({
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
      await fresh.drop();
    },
  };
}

export function kafkaTargets(): BrokerTarget[] {
  const settings = `a topic of ${TOPIC_PARTITIONS} partitions on one broker, idempotent producer, \`acks: -1\`, one send in flight per producer (the relay's lane, shared by its partitions: a partition's time in \`deliver\` includes its wait for the lane)`;
  return [
    {
      what: 'Kafka (@platformatic/kafka)',
      limitLabel: `Producer.send of ${BATCH} records, acks -1, idempotent, one at a time`,
      partitions: PARTITIONS,
      batchSize: BATCH,
      serialSends: true,
      settings,
      open: platformatic,
    },
    {
      what: 'Kafka (kafkajs)',
      limitLabel: `producer.sendBatch of ${BATCH} records, acks -1, idempotent, one at a time`,
      partitions: PARTITIONS,
      batchSize: BATCH,
      serialSends: true,
      settings: `${settings}; the relay sends one topic-partition per sendBatch (kafkajs cannot say which partitions of a failed request were written), the client alone all partitions in one`,
      open: kafkajs,
    },
  ];
}
