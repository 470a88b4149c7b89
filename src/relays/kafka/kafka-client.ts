/**
 * The seam between the Kafka relay and a Kafka client library: the few operations the relay needs,
 * implemented by {@link platformaticProducer} and {@link kafkajsProducer}.
 */

/** One Kafka record as the relay sends it: topic and partition already chosen, everything encoded. */
export interface KafkaRecord {
  readonly topic: string;
  readonly partition: number;
  /** UTF-8 bytes of the group key; `null` sends the record without a key. */
  readonly key: Buffer | null;
  readonly value: Buffer;
  readonly headers: Readonly<Record<string, string>>;
}

/** What a failed send left behind in one topic-partition. */
export type PartitionResult = { readonly landed: true } | { readonly landed: false; readonly error: unknown };

/** `topic:partition` (topic names cannot contain `:`). */
export function partitionId(topic: string, partition: number): string {
  return `${topic}:${partition}`;
}

/**
 * Thrown by {@link KafkaClientAdapter.send} when the send failed: says, per topic-partition of the
 * send, whether its records were written (the broker appends a partition's records all or none).
 * A partition missing from `partitions` is treated as not written.
 */
export class KafkaSendError extends Error {
  constructor(
    message: string,
    readonly partitions: ReadonlyMap<string, PartitionResult>,
    options: { cause: unknown },
  ) {
    super(message, { cause: options.cause });
    this.name = 'KafkaSendError';
  }
}

/**
 * A Kafka client as the relay uses it. Made by {@link platformaticProducer} or
 * {@link kafkajsProducer}; write one yourself only to support another client.
 */
export interface KafkaClientAdapter {
  /** Shown in error messages: `'@platformatic/kafka'`, `'kafkajs'`. */
  readonly client: string;
  /** The user's producer object: the relay keeps one send in flight per producer, across relays. */
  readonly producer: object;
  /**
   * How many topic-partitions one send may carry. kafkajs cannot report which partitions of a
   * failed send were written, so its adapter takes one partition per send.
   */
  readonly partitionsPerSend: number;
  /** Connects (idempotent; called by `start()` and before sends). */
  connect(): Promise<void>;
  /** The topic's partition count, or `undefined` when the topic does not exist. Throws when Kafka cannot say. */
  partitionCount(topic: string): Promise<number | undefined>;
  /** Sends the records with `acks: -1` on the idempotent producer; throws a {@link KafkaSendError} on failure. */
  send(records: readonly KafkaRecord[]): Promise<void>;
  /**
   * Starts a new idempotent producer session (new producer id, sequences from 0). Called before the
   * next send after a failed one: a client that keeps its sequence numbers after a send that was
   * partly or maybe written makes the broker drop the next batch of that partition as a duplicate.
   */
  resetIdempotence?(): Promise<void>;
}
