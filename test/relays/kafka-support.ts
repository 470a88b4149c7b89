/**
 * The Kafka broker of the Kafka relay's tests (127.0.0.1:9092, shared with other test files):
 * topics with random names, deleted when the test file ends, and a consumer that reads them back;
 * and the installed majors of @platformatic/kafka, which every relay test file runs against.
 */
import { afterAll, test } from 'vitest';
import type * as Platformatic from '@platformatic/kafka';
import { engineMismatch, installedPackage } from '../support/engines.js';

/**
 * The @platformatic/kafka module, typed as the current major. The 1.x line has the same API for
 * everything these tests call, but TypeScript tells the two majors' classes apart (they have
 * private fields), so its module is typed as this one; test/relays/kafka-types.ts checks that the
 * relay's adapter takes the producers of both.
 */
export type PlatformaticKafka = typeof Platformatic;

/** One installed major of @platformatic/kafka. */
export interface PlatformaticLine {
  /** `@platformatic/kafka 2.12.1`: names the tests. */
  readonly name: string;
  /** The module, or `undefined` where this Node is older than the line's engines (it is not even loaded). */
  readonly kafka: PlatformaticKafka | undefined;
  /** Why the line's tests are skipped on this Node; `undefined` where they run. */
  readonly unsupported: string | undefined;
}

async function platformaticLine(
  installedAs: string,
  load: () => Promise<unknown>,
): Promise<PlatformaticLine> {
  const unsupported = engineMismatch(installedAs);
  const { version } = installedPackage(installedAs);
  const kafka = unsupported === undefined ? ((await load()) as PlatformaticKafka) : undefined;
  return { name: `@platformatic/kafka ${version}`, kafka, unsupported };
}

/**
 * @platformatic/kafka 2.x (installed as itself, needs Node 22.22+ or 24.6+) and 1.x (the npm alias
 * `platformatic-kafka-v1`, for applications on an older Node 22), newest first.
 */
export const platformaticLines: readonly PlatformaticLine[] = [
  await platformaticLine('@platformatic/kafka', () => import('@platformatic/kafka')),
  await platformaticLine('platformatic-kafka-v1', () => import('platformatic-kafka-v1')),
];

/** The lines this Node runs, with their module. */
export const runnableLines = platformaticLines.filter(
  (line): line is PlatformaticLine & { kafka: PlatformaticKafka } => line.kafka !== undefined,
);

/**
 * Registers, for each line this Node cannot run, one test of the file that is skipped with the
 * reason (what the line's engines field asks for), so that a report shows what did not run and why.
 */
export function skipUnsupportedLines(what: string): void {
  for (const line of platformaticLines) {
    if (line.unsupported !== undefined)
      test(`${what} through ${line.name}`, (context) => context.skip(line.unsupported));
  }
}

/** The newest line this Node runs: the admin and the consumer of the tests. */
const { Admin, Consumer, stringDeserializers } = runnableLines[0]!.kafka;

export const BROKER = { host: '127.0.0.1', port: 9092 };
export const BOOTSTRAP = `${BROKER.host}:${BROKER.port}`;

export const randomName = (prefix: string): string => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;

/**
 * An admin client for this test file, closed after its tests, and `createTopic`: a topic with a
 * random name, deleted after the tests. `maxMessageBytes` sets the topic's max.message.bytes (to
 * make the broker refuse big batches).
 */
export function topicAdmin() {
  const admin = new Admin({ clientId: 'outboxer-test-admin', bootstrapBrokers: [BOOTSTRAP] });
  const topics: string[] = [];
  afterAll(async () => {
    await admin.deleteTopics({ topics }).catch(() => undefined);
    await admin.close();
  });
  async function createTopic(partitions = 3, maxMessageBytes?: number): Promise<string> {
    const topic = randomName('outboxer-test');
    const configs =
      maxMessageBytes === undefined ? [] : [{ name: 'max.message.bytes', value: String(maxMessageBytes) }];
    await admin.createTopics({ topics: [topic], partitions, replicas: 1, configs });
    topics.push(topic);
    await leadersElected(topic);
    return topic;
  }
  /**
   * A topic just created may answer a first send with NOT_LEADER_OR_FOLLOWER, which the relays
   * rightly retry: tests that expect a first send's own outcome wait until every partition has a
   * leader.
   */
  async function leadersElected(topic: string): Promise<void> {
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      const metadata = await admin.metadata({ topics: [topic], forceUpdate: true }).catch(() => undefined);
      const partitions = metadata?.topics.get(topic)?.partitions ?? [];
      if (partitions.length > 0 && partitions.every((p) => p !== undefined && p.leader >= 0)) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`topic ${topic} has no leader for every partition after 15 s`);
  }
  return { admin, createTopic };
}

/** A record as a consumer read it; `id` is its `outboxer-id` header (NaN without one). */
export interface ReadRecord {
  readonly id: number;
  readonly topic: string;
  readonly partition: number;
  readonly key: string | null;
  readonly value: string;
  readonly headers: Record<string, string>;
}

/** A consumer of `topics` from their beginning: `records` grows as they arrive, until `close()`. */
export async function readTopics(topics: string[]) {
  const consumer = new Consumer({
    groupId: randomName('outboxer-reader'),
    clientId: 'outboxer-test-reader',
    bootstrapBrokers: [BOOTSTRAP],
    deserializers: stringDeserializers,
  });
  const stream = await consumer.consume({ topics, mode: 'earliest', autocommit: false, maxWaitTime: 200 });
  const records: ReadRecord[] = [];
  stream.on('data', (record) => {
    const headers = Object.fromEntries(record.headers) as Record<string, string>;
    records.push({
      id: Number(headers['outboxer-id']),
      topic: record.topic,
      partition: record.partition,
      key: record.key ?? null,
      value: record.value!,
      headers,
    });
  });
  return {
    records,
    async close() {
      await stream.close();
      await consumer.close();
    },
  };
}
