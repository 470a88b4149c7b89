/**
 * From outbox messages to Kafka records: topic, key, value, headers, size, partition, and how the
 * records of a batch are cut into sends.
 */
import type { Ordering } from '../../core/options.js';
import { DeliveryError, PermanentError } from '../../core/errors.js';
import { orderingKey, type Envelope } from '../../core/relay.js';
import { standardHeaders } from '../shared/headers.js';
import { javaPartition } from './kafka-murmur2.js';
import type { KafkaRecord } from './kafka-client.js';

/** Bytes a record batch adds besides its records (Kafka's batch header is 61 bytes). */
export const BATCH_OVERHEAD = 100;

/** Where one message of a batch stands while the relay delivers it. */
export interface Draft {
  readonly envelope: Envelope;
  readonly orderKey: string | null;
  readonly topic: string | undefined;
  readonly key: Buffer | null;
  readonly value: Buffer | undefined;
  readonly headers: Record<string, string>;
  /** Estimated size of the record on the wire, uncompressed. */
  readonly bytes: number;
  partition: number;
  /** `ready` until sent; `unsent` when it was not attempted after all. */
  state: 'ready' | 'landed' | 'failed' | 'unsent';
  error?: unknown;
}

/** Checks a Kafka topic name; returns what is wrong, or `undefined`. */
export function topicNameProblem(name: unknown): string | undefined {
  if (typeof name !== 'string' || name.length === 0) return 'it must be a non-empty string';
  if (name.length > 249) return 'it is longer than 249 characters';
  if (name === '.' || name === '..') return 'it cannot be "." or ".."';
  if (!/^[a-zA-Z0-9._-]+$/.test(name)) return 'it may only contain ASCII letters, digits, ".", "_" and "-"';
  return undefined;
}

/** Encodes every message; a message that cannot become a record gets its error here. */
export function draftRecords(
  batch: readonly Envelope[],
  ordering: Ordering,
  topicOf: (envelope: Envelope) => string,
  maxBytes: number,
): Draft[] {
  return batch.map((envelope) => {
    const draft = encode(envelope, topicOf, maxBytes);
    return { ...draft, envelope, orderKey: orderingKey(envelope, ordering), partition: -1 };
  });
}

function encode(
  envelope: Envelope,
  topicOf: (envelope: Envelope) => string,
  maxBytes: number,
): Omit<Draft, 'envelope' | 'orderKey' | 'partition'> {
  const headers = standardHeaders(envelope);
  const key = envelope.groupKey === null ? null : Buffer.from(envelope.groupKey, 'utf8');
  const failed = (error: unknown) => ({
    topic: undefined,
    key,
    value: undefined,
    headers,
    bytes: 0,
    state: 'failed' as const,
    error,
  });
  let topic: string;
  try {
    topic = topicOf(envelope);
  } catch (error) {
    return failed(
      new DeliveryError(
        `The Kafka relay's topic function threw for message ${envelope.id}: ${(error as Error)?.message ?? String(error)}`,
        { cause: error },
      ),
    );
  }
  const problem = topicNameProblem(topic);
  if (problem !== undefined) {
    return failed(
      new PermanentError(
        `The topic function returned ${JSON.stringify(topic)} for message ${envelope.id}, which Kafka does not accept as a topic name: ${problem}.`,
      ),
    );
  }
  let value: Buffer;
  try {
    value = Buffer.from(JSON.stringify(envelope.payload) ?? 'null', 'utf8');
  } catch (error) {
    return failed(
      new PermanentError(
        `The payload of message ${envelope.id} cannot be encoded as JSON: ${(error as Error).message}`,
        { cause: error },
      ),
    );
  }
  let bytes = value.length + (key?.length ?? 0) + 30;
  for (const [name, text] of Object.entries(headers))
    bytes += Buffer.byteLength(name) + Buffer.byteLength(text) + 10;
  if (bytes + BATCH_OVERHEAD > maxBytes) {
    return {
      ...failed(
        new PermanentError(
          `Message ${envelope.id} is about ${bytes} bytes as a Kafka record, more than the relay's maxBytes (${maxBytes}). Kafka would reject it (MESSAGE_TOO_LARGE); raise the topic's max.message.bytes and the relay's maxBytes, or send smaller payloads.`,
        ),
      ),
      topic,
    };
  }
  return { topic, key, value, headers, bytes, state: 'ready' };
}

/**
 * Chooses each ready record's partition: a keyed record goes where the Java client would put it;
 * records without a key share one partition per topic and batch (like Java's sticky partitioner),
 * taken from `stickyPartition`.
 */
export function assignPartitions(
  drafts: readonly Draft[],
  counts: ReadonlyMap<string, number>,
  stickyPartition: (topic: string, partitions: number) => number,
): void {
  const sticky = new Map<string, number>();
  for (const draft of drafts) {
    if (draft.state !== 'ready') continue;
    const partitions = counts.get(draft.topic!)!;
    if (draft.key !== null) {
      draft.partition = javaPartition(draft.key, partitions);
      continue;
    }
    let partition = sticky.get(draft.topic!);
    if (partition === undefined)
      sticky.set(draft.topic!, (partition = stickyPartition(draft.topic!, partitions)));
    draft.partition = partition;
  }
}

/** The record a ready draft sends. */
export function toRecord(draft: Draft): KafkaRecord {
  return {
    topic: draft.topic!,
    partition: draft.partition,
    key: draft.key,
    value: draft.value!,
    headers: draft.headers,
  };
}

/**
 * Marks the ready drafts that follow a failed message of their ordering key: they must not be sent.
 * They stay `ready`, and end up reported as skipped.
 */
export function readyToSend(drafts: readonly Draft[]): Draft[] {
  const failedKeys = new Set<string>();
  const ready: Draft[] = [];
  for (const draft of drafts) {
    const blocked = draft.orderKey !== null && failedKeys.has(draft.orderKey);
    if (draft.state === 'failed' && draft.orderKey !== null) failedKeys.add(draft.orderKey);
    if (draft.state === 'ready' && !blocked) ready.push(draft);
  }
  return ready;
}

/**
 * Cuts the ready records into sends, in id order: as few as `maxBytes` allows, at most
 * `partitionsPerSend` topic-partitions each (kafkajs: one, grouped by partition in order of their
 * first message), or one record per send while isolating a record the broker refused.
 */
export function planSends(
  ready: readonly Draft[],
  options: { maxBytes: number; partitionsPerSend: number; isolate: boolean },
): Draft[][] {
  if (options.isolate) return ready.map((draft) => [draft]);
  const groups: Draft[][] = [];
  if (options.partitionsPerSend === 1) {
    const byPartition = new Map<string, Draft[]>();
    for (const draft of ready) {
      const id = `${draft.topic}:${draft.partition}`;
      let group = byPartition.get(id);
      if (group === undefined) byPartition.set(id, (group = []));
      group.push(draft);
    }
    groups.push(...byPartition.values());
  } else {
    groups.push([...ready]);
  }
  return groups.flatMap((group) => splitBySize(group, options.maxBytes));
}

function splitBySize(group: readonly Draft[], maxBytes: number): Draft[][] {
  const sends: Draft[][] = [];
  let current: Draft[] = [];
  let size = BATCH_OVERHEAD;
  for (const draft of group) {
    if (current.length > 0 && size + draft.bytes > maxBytes) {
      sends.push(current);
      current = [];
      size = BATCH_OVERHEAD;
    }
    current.push(draft);
    size += draft.bytes;
  }
  if (current.length > 0) sends.push(current);
  return sends;
}
