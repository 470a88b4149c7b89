/**
 * What the broker rows measure against: a destination (a fresh topic, queue, stream or receiver of
 * a real broker) that outboxer's relay delivers to, and that the same client library also feeds
 * directly, from memory, with the same records, the same batching and the same delivery guarantees
 * (acks, confirms, PubAcks): the broker's own limit on this machine.
 */
import type { Relay } from 'outboxer';
import { payload } from './support.js';

/** The outbox the broker rows fill and relay (also the `outboxer-outbox` header of the plain records). */
export const BROKER_OUTBOX = 'bench';

/** One message as the plain arm holds it in memory: what the relay reads from its row. */
export interface BenchMessage {
  readonly id: number;
  readonly groupKey: string;
  readonly payload: unknown;
  /** outboxer's standard headers, as every relay sets them. */
  readonly headers: Readonly<Record<string, string>>;
}

/** The messages of a backlog of `count` in memory, numbered and keyed as the SQL fill numbers them. */
export function benchMessages(count: number, groups: number): BenchMessage[] {
  return Array.from({ length: count }, (_, i) => {
    const id = i + 1;
    const groupKey = `order:${id % groups}`;
    return {
      id,
      groupKey,
      payload: payload(id),
      headers: {
        'outboxer-id': String(id),
        'outboxer-outbox': BROKER_OUTBOX,
        'outboxer-group-key': groupKey,
      },
    };
  });
}

/** A fresh destination of one run, opened by {@link BrokerTarget.open} and deleted by `close()`. */
export interface Destination<R = unknown> {
  /** outboxer's relay onto this destination. */
  relay(): Relay;
  /** The client's records of one batch, built before the clock starts. */
  encode(batch: readonly BenchMessage[]): R;
  /** Sends one batch as the relay would (one call, or the calls the relay makes), and waits for the broker's acks. */
  send(records: R): Promise<void>;
  /** How many messages the destination holds (or received): checked after every arm. */
  received(): Promise<number>;
  /** Deletes the topic, queue or stream and closes the clients. */
  close(): Promise<void>;
}

/** One row of the broker group. */
export interface BrokerTarget {
  /** The row's name in the report. */
  readonly what: string;
  /** How the plain arm sends, for the limit column. */
  readonly limitLabel: string;
  /** outboxer's partitions for this row, and the plain arm's loops unless `serialSends`. */
  readonly partitions: number;
  readonly batchSize: number;
  /**
   * The client sends one request at a time per producer (the Kafka relay's lane, shared by its
   * partitions): the plain arm then runs one loop, not one per partition.
   */
  readonly serialSends?: boolean;
  /** What the note of the row says about the settings (delivery guarantees, concurrency). */
  readonly settings: string;
  /** The package the row needs, shown when it is missing. */
  open(): Promise<Destination<unknown>>;
}

export const randomSuffix = (): string => Math.random().toString(36).slice(2, 10);
