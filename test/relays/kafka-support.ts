/**
 * The Kafka broker of the Kafka relay's tests (127.0.0.1:9092, shared with other test files):
 * topics with random names, deleted when the test file ends, and a consumer that reads them back.
 */
import { afterAll } from 'vitest';
import { Admin, Consumer, stringDeserializers } from '@platformatic/kafka';

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
    return topic;
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
