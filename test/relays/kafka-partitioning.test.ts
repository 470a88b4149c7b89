/**
 * Proves that a key lands on the same Kafka partition whoever produced it: the relay through every
 * client (each installed major of @platformatic/kafka, and kafkajs), the clients on their own
 * (kafkajs's DefaultPartitioner, @platformatic/kafka's compatibilityPartitioner) and, when the
 * broker's jars and a JVM are on this machine, the Java client itself. Each producer writes the same
 * keys to its own topic; a consumer reads back the partition of every key.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import type { Envelope } from 'outboxer';
import {
  javaPartition,
  kafkajsProducer,
  kafkaRelay,
  platformaticProducer,
  type KafkaClientAdapter,
} from 'outboxer/kafka';
import { deliverBatch, makeEnvelope } from '../support/envelopes.js';
import { waitFor } from './contract.js';
import { BOOTSTRAP, readTopics, runnableLines, skipUnsupportedLines, topicAdmin } from './kafka-support.js';

const PARTITIONS = 5;
const KEYS = [
  ...Array.from({ length: 60 }, (_, i) => `customer-${i}`),
  'order:42',
  'zürich',
  '日本語キー',
  '😀',
  'a',
  'ab',
  'abc',
  'abcd',
];
const { createTopic } = topicAdmin();
skipUnsupportedLines('the Kafka partitioning tests');

/** key → partition, as a consumer sees the topic. */
async function partitionsByKey(topic: string): Promise<Map<string, number>> {
  const reader = await readTopics([topic]);
  const seen = () => new Map(reader.records.map((record) => [record.key!, record.partition]));
  try {
    await waitFor(() => seen().size >= KEYS.length, 20_000, `every key in ${topic}`);
    return seen();
  } finally {
    await reader.close();
  }
}

const envelopes = (): Envelope[] =>
  KEYS.map((key, i) => makeEnvelope({ id: i + 1, groupKey: key, payload: { key } }));

async function viaRelay(adapter: KafkaClientAdapter, topic: string): Promise<void> {
  const relay = kafkaRelay({ producer: adapter, topic });
  await relay.start!();
  const outcomes = await deliverBatch(relay, envelopes());
  expect(outcomes.every((o) => o.ok)).toBe(true);
}

const kafka = new Kafka({ clientId: 'outboxer-test', brokers: [BOOTSTRAP], logLevel: logLevel.NOTHING });
const platformatic = runnableLines.map((line) => ({
  ...line,
  producer: new line.kafka.Producer({
    clientId: 'outboxer-test',
    bootstrapBrokers: [BOOTSTRAP],
    idempotent: true,
  }),
}));
const kafkajs = kafka.producer({
  idempotent: true,
  maxInFlightRequests: 1,
  createPartitioner: Partitioners.DefaultPartitioner,
});
const kafkajsAdmin = kafka.admin();
afterAll(async () => {
  for (const { producer } of platformatic) await producer.close();
  await kafkajs.disconnect();
  await kafkajsAdmin.disconnect();
});

const producers: Record<string, (topic: string) => Promise<void>> = {
  ...Object.fromEntries(
    platformatic.map(({ name, producer }) => [
      `the relay through ${name}`,
      (topic: string) => viaRelay(platformaticProducer(producer), topic),
    ]),
  ),
  'the relay through kafkajs': (topic) => viaRelay(kafkajsProducer(kafkajs, { admin: kafkajsAdmin }), topic),
  'kafkajs with Partitioners.DefaultPartitioner': async (topic) => {
    await kafkajs.connect();
    await kafkajs.send({ topic, acks: -1, messages: KEYS.map((key) => ({ key, value: key })) });
  },
  ...Object.fromEntries(
    runnableLines.map(({ name, kafka }) => [
      `${name} with compatibilityPartitioner`,
      async (topic: string) => {
        const producer = new kafka.Producer({
          clientId: 'outboxer-test-compat',
          bootstrapBrokers: [BOOTSTRAP],
          serializers: kafka.stringSerializers,
          partitioner: kafka.compatibilityPartitioner,
        });
        try {
          await producer.send({ messages: KEYS.map((key) => ({ topic, key, value: key })) });
        } finally {
          await producer.close();
        }
      },
    ]),
  ),
};

const expected = new Map(KEYS.map((key) => [key, javaPartition(key, PARTITIONS)]));
const seen = new Map<string, Map<string, number>>();

beforeAll(async () => {
  for (const [name, produce] of Object.entries(producers)) {
    const topic = await createTopic(PARTITIONS);
    await produce(topic);
    seen.set(name, await partitionsByKey(topic));
  }
});

test.each(Object.keys(producers))('%s puts every key on the Java partition', (name) => {
  expect(seen.get(name)).toEqual(expected);
});

test.each(runnableLines.map(({ name, kafka }) => [name, kafka] as const))(
  '%s: its default partitioner is not Java-compatible (why the relay chooses partitions itself)',
  (_name, kafka) => {
    const differ = KEYS.filter(
      (key) => kafka.defaultPartitioner({ topic: 't' }, Buffer.from(key)) % PARTITIONS !== expected.get(key),
    );
    expect(differ.length).toBeGreaterThan(0);
  },
);

const libs = join(
  process.env.OUTBOXER_SERVICES_DIR ?? join(homedir(), '.cache', 'outboxer-services'),
  'kafka',
  'libs',
);
const java = process.env.JAVA_HOME === undefined ? 'java' : join(process.env.JAVA_HOME, 'bin', 'java');
const javaReady = existsSync(libs) && spawnSync(java, ['-version']).status === 0;

// Needs the jars that scripts/services/kafka.sh downloads, and a JVM; skipped on machines without them.
test.skipIf(!javaReady)(
  'the Java client (kafka-console-producer) puts every key where the relay does',
  async () => {
    const topic = await createTopic(PARTITIONS);
    const run = spawnSync(
      java,
      [
        '-Xmx256m',
        '-Dfile.encoding=UTF-8',
        '-cp',
        `${libs}/*`,
        'org.apache.kafka.tools.ConsoleProducer',
        '--bootstrap-server',
        BOOTSTRAP,
        '--topic',
        topic,
        '--property',
        'parse.key=true',
        '--property',
        'key.separator=\t',
      ],
      { input: KEYS.map((key) => `${key}\t${key}`).join('\n') + '\n', encoding: 'utf8', timeout: 60_000 },
    );
    expect(run.status, run.stderr).toBe(0);
    const javaLayout = await partitionsByKey(topic);
    for (const [name, layout] of seen)
      if (name.startsWith('the relay')) expect(javaLayout, name).toEqual(layout);
  },
  90_000,
);
