/**
 * Partition counts per topic, cached, with a deadline: the relay needs them to route keys like the
 * Java client, and to tell a missing topic apart from a slow cluster.
 */
import { OutboxerError } from '../../core/errors.js';
import { withDeadline } from '../shared/deadline.js';
import type { KafkaClientAdapter } from './kafka-client.js';
import { describeKafkaError } from './kafka-errors.js';

/** How long a known partition count is trusted (the Java client refreshes metadata every 5 minutes). */
const COUNT_TTL = 60_000;
/** How long "this topic does not exist" is trusted: short, so a topic created meanwhile is used soon. */
const MISSING_TTL = 5_000;

/** What a wait on Kafka rejects with when the batch's signal fires (see {@link abandoned}). */
export class Abandoned extends Error {
  constructor(readonly reason: unknown) {
    super('abandoned');
  }
}

/** The `onAbort` of {@link withDeadline} for waits on Kafka: an {@link Abandoned} with the reason. */
export const abandoned = (reason: unknown): Abandoned => new Abandoned(reason);

interface Entry {
  readonly count: Promise<number | undefined>;
  expires: number;
}

/** Partition counts of the topics a relay sends to. */
export class TopicPartitions {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly adapter: KafkaClientAdapter,
    private readonly timeout: number,
  ) {}

  /**
   * The topic's partition count, or `undefined` when the topic does not exist. Throws a retryable
   * RELAY_MISCONFIGURED error when Kafka does not answer within the timeout, {@link Abandoned} when
   * the signal fires.
   */
  lookup(topic: string, signal?: AbortSignal): Promise<number | undefined> {
    const now = Date.now();
    let entry = this.entries.get(topic);
    if (entry === undefined || entry.expires <= now) {
      const count = this.adapter.partitionCount(topic);
      const fresh: Entry = { count, expires: Number.POSITIVE_INFINITY };
      this.entries.set(topic, fresh);
      entry = fresh;
      count.then(
        (value) => void (fresh.expires = Date.now() + (value === undefined ? MISSING_TTL : COUNT_TTL)),
        () => void (this.entries.get(topic) === fresh && this.entries.delete(topic)),
      );
    }
    return withDeadline(entry.count, this.timeout, signal, () => this.timeoutError(topic), abandoned).catch(
      (error: unknown) => {
        if (error instanceof Abandoned || error instanceof OutboxerError) throw error;
        throw new OutboxerError(
          'RELAY_MISCONFIGURED',
          `Could not read the metadata of Kafka topic "${topic}" through ${this.adapter.client}: ${describeKafkaError(error)}. Check the producer's brokers and credentials.`,
          { cause: error, retryable: true },
        );
      },
    );
  }

  /** Forgets a topic, after a send said its metadata was stale or that it vanished. */
  invalidate(topic: string): void {
    this.entries.delete(topic);
  }

  private timeoutError(topic: string): OutboxerError {
    return new OutboxerError(
      'RELAY_MISCONFIGURED',
      `Kafka did not return metadata for topic "${topic}" within ${this.timeout} ms through ${this.adapter.client}: the topic probably does not exist (the relay never creates topics), or the brokers are unreachable. Create the topic, or check the producer's bootstrap brokers.`,
      { retryable: true },
    );
  }
}
