/** The Kafka relay's options, checked once when the relay is made. */
import { OutboxerError } from '../../core/errors.js';
import type { Envelope } from '../../core/relay.js';
import type { KafkaClientAdapter } from './kafka-client.js';
import { topicNameProblem } from './kafka-records.js';

export interface KafkaRelayOptions {
  /** The client to send with: {@link platformaticProducer}`(producer)` or {@link kafkajsProducer}`(producer, { admin })`. */
  producer: KafkaClientAdapter;
  /**
   * The topic: one name for the whole outbox, or a function choosing it per message (for example by
   * `envelope.type`). The relay never creates topics.
   */
  topic: string | ((envelope: Envelope) => string);
  /** Shown in logs and telemetry. Default `'kafka'`. */
  name?: string;
  /**
   * The most bytes (estimated, uncompressed) the relay puts in one send, and so the largest message
   * it sends: a bigger message fails at once with a PermanentError. Keep it at or below the topic's
   * `max.message.bytes` (broker default 1048588). A batch larger than this goes out in several sends,
   * and batches waiting for the producer share a send only up to this size. Default `1_000_000`.
   */
  maxBytes?: number;
  /**
   * Whether `start()` checks that Kafka answers and, for a fixed topic, that the topic exists, and
   * throws RELAY_MISCONFIGURED otherwise. Set `false` to let the application start while Kafka is
   * down (messages then wait in the outbox). Default `true`.
   */
  startupCheck?: boolean;
  /** Milliseconds to wait for Kafka's answer at start and for a topic's metadata. Default `10_000`. */
  metadataTimeout?: number;
}

const OPTION_KEYS = new Set(['producer', 'topic', 'name', 'maxBytes', 'startupCheck', 'metadataTimeout']);
export interface ResolvedOptions {
  readonly adapter: KafkaClientAdapter;
  readonly topic: string | ((envelope: Envelope) => string);
  readonly name: string;
  readonly maxBytes: number;
  readonly startupCheck: boolean;
  readonly metadataTimeout: number;
}

export function resolveOptions(raw: KafkaRelayOptions): ResolvedOptions {
  if (typeof raw !== 'object' || raw === null) throw invalid('options', 'an object { producer, topic }', raw);
  for (const key of Object.keys(raw)) {
    if (!OPTION_KEYS.has(key))
      throw invalid(key, `one of the known options (${[...OPTION_KEYS].join(', ')})`, 'an unknown option');
  }
  const adapter = raw.producer;
  if (
    typeof adapter !== 'object' ||
    adapter === null ||
    typeof adapter.send !== 'function' ||
    typeof adapter.partitionCount !== 'function'
  ) {
    throw invalid(
      'producer',
      'platformaticProducer(producer) or kafkajsProducer(producer, { admin })',
      adapter,
    );
  }
  if (typeof raw.topic !== 'function') {
    const problem = topicNameProblem(raw.topic);
    if (problem !== undefined)
      throw invalid(
        'topic',
        `a Kafka topic name or a function (envelope) => topic name; ${problem}`,
        raw.topic,
      );
  }
  const name = raw.name ?? 'kafka';
  if (typeof name !== 'string' || name.length === 0) throw invalid('name', 'a non-empty string', name);
  const startupCheck = raw.startupCheck ?? true;
  if (typeof startupCheck !== 'boolean') throw invalid('startupCheck', 'true or false', startupCheck);
  return Object.freeze({
    adapter,
    topic: raw.topic,
    name,
    maxBytes: integer('maxBytes', raw.maxBytes, 1_000_000, 1024, 2 ** 31 - 1),
    startupCheck,
    metadataTimeout: integer('metadataTimeout', raw.metadataTimeout, 10_000, 100, 600_000),
  });
}

function integer(name: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw invalid(name, `an integer from ${min} to ${max}`, value);
  }
  return value;
}

function invalid(option: string, expected: string, got: unknown): OutboxerError {
  const shown =
    typeof got === 'function'
      ? 'a function'
      : typeof got === 'string' && got === 'an unknown option'
        ? got
        : (JSON.stringify(got) ?? String(got));
  return new OutboxerError(
    'INVALID_OPTIONS',
    `kafkaRelay: options.${option} must be ${expected}; got ${shown}.`,
  );
}
