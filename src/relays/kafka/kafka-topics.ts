/**
 * Partition counts per topic, cached, with a deadline: the relay needs them to route keys like the
 * Java client, and to tell a missing topic apart from a slow cluster.
 */
import { OutboxerError } from '../../core/errors.js';
import type { KafkaClientAdapter } from './kafka-client.js';
import { describeKafkaError } from './kafka-errors.js';

/** How long a known partition count is trusted (the Java client refreshes metadata every 5 minutes). */
const COUNT_TTL = 60_000;
/** How long "this topic does not exist" is trusted: short, so a topic created meanwhile is used soon. */
const MISSING_TTL = 5_000;

/** Rejected with by {@link withDeadline} when the signal fires. */
export class Abandoned extends Error {
  constructor(readonly reason: unknown) {
    super('abandoned');
  }
}

/**
 * Waits for `promise`, but no longer than `ms` (then rejects with `onTimeout()`) and no longer than
 * `signal` stays unaborted (then rejects with {@link Abandoned}). Leaves no timer or listener behind.
 */
export function withDeadline<T>(
  promise: Promise<T>,
  ms: number,
  signal: AbortSignal | undefined,
  onTimeout: () => unknown,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal?.aborted) {
      reject(new Abandoned(signal.reason));
      return;
    }
    const onAbort = (): void => finish(() => reject(new Abandoned(signal!.reason)));
    const timer = Number.isFinite(ms) ? setTimeout(() => finish(() => reject(onTimeout())), ms) : undefined;
    signal?.addEventListener('abort', onAbort, { once: true });
    let done = false;
    function finish(settle: () => void): void {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      settle();
    }
    promise.then(
      (value) => finish(() => resolve(value)),
      (error: unknown) => finish(() => reject(error)),
    );
  });
}

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
    return withDeadline(entry.count, this.timeout, signal, () => this.timeoutError(topic)).catch(
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
