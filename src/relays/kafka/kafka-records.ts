/**
 * From outbox messages to Kafka records: topic, key, value, headers, size, partition, and how the
 * records of a batch are cut into sends.
 */
import type { Ordering } from '../../core/options.js';
import { DeliveryError, PermanentError } from '../../core/errors.js';
import { orderingKey, type Envelope } from '../../core/relay.js';
import { payloadJson } from '../../core/payload.js';
import { CheckedNames } from '../shared/checked-names.js';
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

/**
 * Encodes every message; a message that cannot become a record gets its error here. Runs for every
 * message the relay sends (about a microsecond each, as much as the client's own encoding), so
 * it allocates one draft and its buffers per message and nothing else.
 */
export function draftRecords(
  batch: readonly Envelope[],
  ordering: Ordering,
  topicOf: (envelope: Envelope) => string,
  maxBytes: number,
): Draft[] {
  const topics = new CheckedNames(topicNameProblem);
  return batch.map((envelope) =>
    encode(envelope, orderingKey(envelope, ordering), topicOf, topics, maxBytes),
  );
}

function encode(
  envelope: Envelope,
  orderKey: string | null,
  topicOf: (envelope: Envelope) => string,
  topics: CheckedNames,
  maxBytes: number,
): Draft {
  const headers = standardHeaders(envelope);
  const key = envelope.groupKey === null ? null : Buffer.from(envelope.groupKey, 'utf8');
  const topic = topicFor(envelope, topicOf, topics);
  if (topic instanceof Error) return failedDraft(envelope, orderKey, undefined, key, headers, topic);
  const value = jsonValue(envelope);
  if (value instanceof Error) return failedDraft(envelope, orderKey, undefined, key, headers, value);
  const bytes = recordBytes(key, value, headers);
  if (bytes + BATCH_OVERHEAD > maxBytes) {
    const message = `Message ${envelope.id} is about ${bytes} bytes as a Kafka record, more than the relay's maxBytes (${maxBytes}). Kafka would reject it (MESSAGE_TOO_LARGE); raise the topic's max.message.bytes and the relay's maxBytes, or send smaller payloads.`;
    return failedDraft(envelope, orderKey, topic, key, headers, new PermanentError(message));
  }
  return {
    envelope,
    orderKey,
    topic,
    key,
    value,
    headers,
    bytes,
    partition: -1,
    state: 'ready',
    error: undefined,
  };
}

/** The message's topic, or why it has none Kafka accepts. */
function topicFor(
  envelope: Envelope,
  topicOf: (envelope: Envelope) => string,
  topics: CheckedNames,
): string | Error {
  let topic: string;
  try {
    topic = topicOf(envelope);
  } catch (error) {
    const message = `The Kafka relay's topic function threw for message ${envelope.id}: ${(error as Error)?.message ?? String(error)}`;
    return new DeliveryError(message, { cause: error });
  }
  const problem = topics.problem(topic);
  if (problem === undefined) return topic;
  return new PermanentError(
    `The topic function returned ${JSON.stringify(topic)} for message ${envelope.id}, which Kafka does not accept as a topic name: ${problem}.`,
  );
}

/** The payload as JSON bytes, or why it cannot be. */
function jsonValue(envelope: Envelope): Buffer | Error {
  try {
    return Buffer.from(payloadJson(envelope), 'utf8');
  } catch (error) {
    const message = `The payload of message ${envelope.id} cannot be encoded as JSON: ${(error as Error).message}`;
    return new PermanentError(message, { cause: error });
  }
}

function failedDraft(
  envelope: Envelope,
  orderKey: string | null,
  topic: string | undefined,
  key: Buffer | null,
  headers: Record<string, string>,
  error: unknown,
): Draft {
  return {
    envelope,
    orderKey,
    topic,
    key,
    value: undefined,
    headers,
    bytes: 0,
    partition: -1,
    state: 'failed',
    error,
  };
}

/** A record's size on the wire, uncompressed, about: its bytes plus each field's framing. */
function recordBytes(key: Buffer | null, value: Buffer, headers: Readonly<Record<string, string>>): number {
  let bytes = value.length + (key?.length ?? 0) + 30;
  for (const name in headers) bytes += utf8Length(name) + utf8Length(headers[name]!) + 10;
  return bytes;
}

/** UTF-8 length of a string, counted in JS: `Buffer.byteLength` costs more on header-sized strings. */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    // Two bytes below U+0800, three above; a surrogate pair's two units make four.
    if (unit >= 0x80) bytes += unit < 0x800 || (unit >= 0xd800 && unit <= 0xdfff) ? 1 : 2;
  }
  return bytes;
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
