/**
 * Kafka acknowledges by offset, and an offset committed acknowledges every earlier message of its
 * partition. So the receivers run the messages of one partition one after another, in the order
 * they are given, and once one failed they neither handle nor commit any later message of that
 * partition: committing past it would lose it. The failed message itself (and anything before
 * it), delivered again after the consumer re-reads from the committed offset, goes through, and
 * clears the stop once it succeeds.
 */
import { OutboxerError } from '../../core/errors.js';

interface PartitionState {
  /** Resolves when the last message given for this partition has finished, either way. */
  tail: Promise<void>;
  /** The offset of the earliest message that failed and has not succeeded since. */
  failedAt: bigint | undefined;
}

export class PartitionSequencer {
  private readonly partitions = new Map<string, PartitionState>();

  constructor(private readonly what: string) {}

  /** Runs `work` for the message at `offset` of `topic`/`partition`, after the earlier ones. */
  run<T>(topic: string, partition: number, offset: bigint, work: () => Promise<T>): Promise<T> {
    const key = `${topic}/${partition}`;
    let state = this.partitions.get(key);
    if (state === undefined)
      this.partitions.set(key, (state = { tail: Promise.resolve(), failedAt: undefined }));
    const current = state;
    const result = current.tail.then(async () => {
      if (current.failedAt !== undefined && offset > current.failedAt) {
        throw new OutboxerError(
          'INVALID_STATE',
          `${this.what} did not handle offset ${offset} of ${key}: the message at offset ${current.failedAt} failed before it, and committing a later offset would acknowledge it unhandled. Stop consuming and consume again from the committed offset (a new stream, or let the client restart), which delivers it again.`,
        );
      }
      try {
        const value = await work();
        if (current.failedAt !== undefined && offset >= current.failedAt) current.failedAt = undefined;
        return value;
      } catch (error) {
        if (current.failedAt === undefined || offset < current.failedAt) current.failedAt = offset;
        throw error;
      }
    });
    current.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}
