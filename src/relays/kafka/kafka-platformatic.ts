/**
 * The @platformatic/kafka adapter, for 1.x (1.35+) and 2.x alike: what it calls has the same shape in
 * both majors. Only types are described here: nothing imports the client at run time.
 */
import diagnostics from 'node:diagnostics_channel';
import { OutboxerError } from '../../core/errors.js';
import { OUTBOXER_HEADERS } from '../shared/headers.js';
import {
  KafkaSendError,
  partitionId,
  type KafkaClientAdapter,
  type KafkaRecord,
  type PartitionResult,
} from './kafka-client.js';
import { authenticationFailure, describeKafkaError, kafkaErrorNames } from './kafka-errors.js';

/** A record as `Producer.send` takes it (a producer without serializers takes Buffers). */
export interface PlatformaticMessage {
  topic: string;
  partition: number;
  key?: Buffer;
  value: Buffer;
  headers: Map<Buffer, Buffer>;
}

/**
 * The part of a @platformatic/kafka `Producer` (1.x or 2.x) the relay uses. Create it without
 * `serializers` (the relay sends Buffers) and with `idempotent: true`.
 */
export interface PlatformaticProducerLike {
  send(options: {
    messages: PlatformaticMessage[];
    acks: number;
    idempotent: boolean;
    autocreateTopics: boolean;
  }): Promise<unknown>;
  metadata(options: {
    topics: string[];
    autocreateTopics: boolean;
  }): Promise<{ topics: Map<string, { partitionsCount: number } | undefined> }>;
  initIdempotentProducer(options: Record<string, never>): Promise<unknown>;
  /** The client's instance id: what its connections report as `ownerId` in diagnostics events. */
  readonly instanceId?: number;
}

/**
 * Lets the Kafka relay send through a @platformatic/kafka producer, 1.x (1.35+) or 2.x. The relay
 * passes `idempotent: true` and `acks: -1` (all in-sync replicas) on every send, chooses each
 * record's partition with the Java client's murmur2 partitioner (so it does not depend on the
 * producer's `partitioner`, whose default is not Java-compatible in either major), never
 * auto-creates topics, and after a failed send starts a new idempotent session before sending again.
 * You create, and close, the producer.
 *
 * @example
 * import { Producer } from '@platformatic/kafka';
 * const producer = new Producer({ clientId: 'outboxer', bootstrapBrokers: ['127.0.0.1:9092'], idempotent: true });
 * const relay = kafkaRelay({ producer: platformaticProducer(producer), topic: 'orders' });
 */
export function platformaticProducer(producer: PlatformaticProducerLike): KafkaClientAdapter {
  if (
    typeof producer !== 'object' ||
    producer === null ||
    typeof producer.send !== 'function' ||
    typeof producer.metadata !== 'function'
  ) {
    throw new OutboxerError(
      'INVALID_OPTIONS',
      'platformaticProducer(producer): expected a Producer from @platformatic/kafka, e.g. new Producer({ clientId, bootstrapBrokers, idempotent: true }).',
    );
  }
  return {
    client: '@platformatic/kafka',
    producer,
    partitionsPerSend: Number.POSITIVE_INFINITY,
    async connect() {
      // The client connects lazily; a metadata request without topics proves the brokers answer.
      await failOnAuthentication(producer, producer.metadata({ topics: [], autocreateTopics: false }));
    },
    async partitionCount(topic) {
      try {
        const metadata = await failOnAuthentication(
          producer,
          producer.metadata({ topics: [topic], autocreateTopics: false }),
        );
        return metadata.topics.get(topic)?.partitionsCount;
      } catch (error) {
        if (isUnknownTopic(error)) return undefined;
        throw error;
      }
    },
    async send(records) {
      try {
        await producer.send({
          messages: records.map(toMessage),
          acks: -1,
          idempotent: true,
          autocreateTopics: false,
        });
      } catch (error) {
        throw new KafkaSendError(
          `@platformatic/kafka send failed: ${describeKafkaError(error)}`,
          partitionResults(error),
          { cause: error },
        );
      }
    },
    // 1.x keeps its producer id and sequence numbers after a failed send, so the broker would drop
    // the next batch of a partly written partition as a duplicate; 2.x starts over by itself, and
    // this costs it one extra InitProducerId request per failed send.
    async resetIdempotence() {
      await producer.initIdempotentProducer({});
    },
  };
}

/** The diagnostics channel on which @platformatic/kafka reports a failed connection attempt. */
const CONNECT_ERRORS = 'tracing:plt:kafka:connections:connects:error';

/**
 * `operation`, or the error of a connection of `producer` that Kafka refused to authenticate,
 * whichever comes first. The client retries a metadata request through such failures until it is
 * closed (wrong credentials look like a broker that never answers); its diagnostics channel is
 * where the reason shows. Only for metadata requests: abandoning a send the client keeps retrying
 * would let the next send overtake it.
 */
function failOnAuthentication<T>(producer: PlatformaticProducerLike, operation: Promise<T>): Promise<T> {
  const owner = producer.instanceId;
  if (typeof owner !== 'number') return operation;
  let listener: (message: unknown) => void = () => undefined;
  const refused = new Promise<never>((_, reject) => {
    listener = (message) => {
      const { connection, error } = (message ?? {}) as {
        connection?: { ownerId?: unknown };
        error?: unknown;
      };
      if (connection?.ownerId === owner && authenticationFailure(error) !== undefined) reject(error);
    };
  });
  diagnostics.subscribe(CONNECT_ERRORS, listener);
  return Promise.race([operation, refused]).finally(() => diagnostics.unsubscribe(CONNECT_ERRORS, listener));
}

/** outboxer's header names, encoded once: every record carries them, and the client only reads them. */
const STANDARD_HEADER_NAMES = new Map<string, Buffer>(
  Object.values(OUTBOXER_HEADERS).map((name) => [name, Buffer.from(name)]),
);

function toMessage(record: KafkaRecord): PlatformaticMessage {
  const headers = new Map<Buffer, Buffer>();
  for (const name in record.headers)
    headers.set(STANDARD_HEADER_NAMES.get(name) ?? Buffer.from(name), Buffer.from(record.headers[name]!));
  const message: PlatformaticMessage = {
    topic: record.topic,
    partition: record.partition,
    value: record.value,
    headers,
  };
  if (record.key !== null) message.key = record.key;
  return message;
}

function isUnknownTopic(error: unknown): boolean {
  // Metadata turns UNKNOWN_TOPIC_OR_PARTITION into a UserError "Unknown topic <name>." once its retries are spent.
  return (
    kafkaErrorNames(error).includes('UNKNOWN_TOPIC_OR_PARTITION') ||
    /^Unknown topic /.test(String((error as Error | undefined)?.message ?? ''))
  );
}

interface ProduceResponseLike {
  responses?: Array<{ name?: unknown; partitionResponses?: Array<{ index?: unknown; errorCode?: unknown }> }>;
}

/**
 * Which partitions a failed send wrote. The client attaches `produced.offsets` for brokers whose
 * request succeeded, and a broker that refused some partitions answers with a per-partition error
 * code (0 = written) that the client keeps in the ResponseError's `response`.
 */
function partitionResults(error: unknown): Map<string, PartitionResult> {
  const results = new Map<string, PartitionResult>();
  const produced = (
    error as { produced?: { offsets?: Array<{ topic: string; partition: number }> } } | undefined
  )?.produced;
  for (const offset of produced?.offsets ?? [])
    results.set(partitionId(offset.topic, offset.partition), { landed: true });
  for (const node of responseErrors(error)) {
    const response = node.response as ProduceResponseLike;
    response.responses?.forEach((topic, i) => {
      topic.partitionResponses?.forEach((partition, j) => {
        if (typeof topic.name !== 'string' || typeof partition.index !== 'number') return;
        const id = partitionId(topic.name, partition.index);
        if (partition.errorCode === 0) {
          results.set(id, { landed: true });
          return;
        }
        if (results.get(id)?.landed === true) return; // written by an earlier attempt of the client's retries
        const path = `/responses/${i}/partition_responses/${j}`;
        const own = Array.isArray(node.errors)
          ? node.errors.find(
              (e: { path?: unknown }) => typeof e?.path === 'string' && e.path.startsWith(path),
            )
          : undefined;
        results.set(id, { landed: false, error: own ?? error });
      });
    });
  }
  return results;
}

function responseErrors(
  error: unknown,
): Array<Record<string, unknown> & { errors?: Array<{ path?: unknown }> }> {
  const found: Array<Record<string, unknown>> = [];
  const stack: unknown[] = [error];
  const seen = new Set<unknown>();
  while (stack.length > 0 && seen.size < 200) {
    const node = stack.pop();
    if (typeof node !== 'object' || node === null || seen.has(node)) continue;
    seen.add(node);
    const record = node as Record<string, unknown>;
    const response = record.response as ProduceResponseLike | undefined;
    if (Array.isArray(response?.responses)) found.push(record);
    if (record.cause !== undefined) stack.push(record.cause);
    if (Array.isArray(record.errors)) stack.push(...record.errors);
  }
  return found;
}
