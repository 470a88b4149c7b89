/**
 * The kafkajs adapter. Only types are described here: nothing imports kafkajs at run time.
 */
import { OutboxerError } from '../../core/errors.js';
import { KafkaSendError, partitionId, type KafkaClientAdapter, type KafkaRecord } from './kafka-client.js';
import { describeKafkaError, kafkaErrorNames } from './kafka-errors.js';

/** A record as kafkajs `sendBatch` takes it. */
export interface KafkajsMessage {
  key: Buffer | null;
  value: Buffer;
  headers: Record<string, string>;
  partition: number;
}

/** The part of a kafkajs `Producer` the relay uses. Create it with `kafka.producer({ idempotent: true, maxInFlightRequests: 1 })`. */
export interface KafkajsProducerLike {
  connect(): Promise<void>;
  sendBatch(batch: {
    topicMessages: Array<{ topic: string; messages: KafkajsMessage[] }>;
    acks: number;
  }): Promise<unknown>;
  isIdempotent(): boolean;
}

/** The part of a kafkajs `Admin` the relay uses: topic metadata (partition counts, missing topics). */
export interface KafkajsAdminLike {
  connect(): Promise<void>;
  fetchTopicMetadata(options: {
    topics: string[];
  }): Promise<{ topics: Array<{ name: string; partitions: readonly unknown[] }> }>;
}

export interface KafkajsProducerOptions {
  /**
   * An admin client of the same `Kafka` instance (`kafka.admin()`). kafkajs producers do not expose
   * topic metadata, and the relay needs the partition counts to route keys like the Java client and
   * to report a missing topic clearly. Required.
   */
  admin: KafkajsAdminLike;
}

/**
 * Lets the Kafka relay send through a kafkajs producer. The relay sends with `acks: -1`, sets each
 * record's partition itself (Java's murmur2 partitioner, the same as kafkajs 2.x's
 * `Partitioners.DefaultPartitioner`), and sends one topic-partition per `sendBatch` call: kafkajs
 * does not say which partitions of a failed request were written, and after such a failure it
 * keeps sequence numbers that make the broker drop the next batch of a written partition as a
 * duplicate. One partition per call is all-or-nothing, so that cannot happen. `start()` connects
 * the producer and the admin; you disconnect them after `outboxer.stop()`.
 *
 * kafkajs is unmaintained since 2023 and marks idempotence experimental; prefer
 * {@link platformaticProducer} for new code.
 *
 * @example
 * import { Kafka } from 'kafkajs';
 * const kafka = new Kafka({ brokers: ['127.0.0.1:9092'] });
 * const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
 * const relay = kafkaRelay({ producer: kafkajsProducer(producer, { admin: kafka.admin() }), topic: 'orders' });
 */
export function kafkajsProducer(
  producer: KafkajsProducerLike,
  options: KafkajsProducerOptions,
): KafkaClientAdapter {
  if (
    typeof producer !== 'object' ||
    producer === null ||
    typeof producer.sendBatch !== 'function' ||
    typeof producer.isIdempotent !== 'function'
  ) {
    throw new OutboxerError(
      'INVALID_OPTIONS',
      'kafkajsProducer(producer, { admin }): expected a kafkajs Producer, e.g. kafka.producer({ idempotent: true, maxInFlightRequests: 1 }).',
    );
  }
  if (!producer.isIdempotent()) {
    throw new OutboxerError(
      'INVALID_OPTIONS',
      'kafkajsProducer(producer): the producer is not idempotent. Create it with kafka.producer({ idempotent: true, maxInFlightRequests: 1 }) so that its retries cannot duplicate or reorder records.',
    );
  }
  const admin = options?.admin;
  if (typeof admin !== 'object' || admin === null || typeof admin.fetchTopicMetadata !== 'function') {
    throw new OutboxerError(
      'INVALID_OPTIONS',
      'kafkajsProducer(producer, { admin }): options.admin must be a kafkajs Admin of the same Kafka instance (kafka.admin()).',
    );
  }
  let connected: Promise<void> | undefined;
  const connect = (): Promise<void> => {
    connected ??= Promise.all([producer.connect(), admin.connect()]).then(
      () => undefined,
      (error: unknown) => {
        connected = undefined; // Try again on the next call.
        throw error;
      },
    );
    return connected;
  };
  return {
    client: 'kafkajs',
    producer,
    partitionsPerSend: 1,
    connect,
    async partitionCount(topic) {
      await connect();
      try {
        const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
        return metadata.topics.find((t) => t.name === topic)?.partitions.length;
      } catch (error) {
        if (kafkaErrorNames(error).includes('UNKNOWN_TOPIC_OR_PARTITION')) return undefined;
        throw error;
      }
    },
    async send(records) {
      const partitions = [...new Set(records.map((r) => partitionId(r.topic, r.partition)))];
      try {
        await connect();
        await producer.sendBatch({ topicMessages: byTopic(records), acks: -1 });
      } catch (error) {
        // Nothing is known to be written: kafkajs reports a failed request as a whole.
        const results = new Map(partitions.map((id) => [id, { landed: false as const, error }]));
        throw new KafkaSendError(`kafkajs send failed: ${describeKafkaError(error)}`, results, {
          cause: error,
        });
      }
    },
  };
}

function byTopic(records: readonly KafkaRecord[]): Array<{ topic: string; messages: KafkajsMessage[] }> {
  const topics = new Map<string, KafkajsMessage[]>();
  for (const record of records) {
    let messages = topics.get(record.topic);
    if (messages === undefined) topics.set(record.topic, (messages = []));
    messages.push({
      key: record.key,
      value: record.value,
      headers: { ...record.headers },
      partition: record.partition,
    });
  }
  return [...topics].map(([topic, messages]) => ({ topic, messages }));
}
