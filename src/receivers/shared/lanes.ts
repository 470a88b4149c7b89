/**
 * Messages that must be handled in order, one lane at a time: a Kafka partition (an offset
 * committed acknowledges every earlier record of it), an SQS FIFO group within one receive.
 * Calls for one lane run one after another in the order they were made. When one fails, the
 * calls of its lane already waiting behind it are refused, neither handled nor acknowledged:
 * acknowledging them would skip the failed one (Kafka) or overtake it (SQS). The failed message
 * itself, or an earlier one, still goes through. Once the lane has no call left waiting it
 * starts afresh, so that a lane that moved to another consumer and back is not refused for good.
 */

interface Lane {
  /** Resolves when the last call made for this lane has finished, either way. */
  tail: Promise<void>;
  /** Calls made and not finished. */
  pending: number;
  /** The position of the earliest call that failed while calls were waiting. */
  failedAt: bigint | undefined;
}

export class OrderedLanes {
  private readonly lanes = new Map<string, Lane>();

  /**
   * Runs `work` for the message at `position` of `lane` after the lane's earlier calls; rejects
   * with `refusal(failedAt)` without running it when an earlier waiting call failed.
   */
  run<T>(
    lane: string,
    position: bigint,
    work: () => Promise<T>,
    refusal: (failedAt: bigint) => Error,
  ): Promise<T> {
    let state = this.lanes.get(lane);
    if (state === undefined)
      this.lanes.set(lane, (state = { tail: Promise.resolve(), pending: 0, failedAt: undefined }));
    const current = state;
    current.pending += 1;
    const result = current.tail.then(async () => {
      const failedAt = current.failedAt;
      if (failedAt !== undefined && position > failedAt) throw refusal(failedAt);
      try {
        const value = await work();
        if (failedAt !== undefined && position >= failedAt) current.failedAt = undefined; // it went through
        return value;
      } catch (error) {
        if (current.failedAt === undefined || position < current.failedAt) current.failedAt = position;
        throw error;
      }
    });
    current.tail = result.then(
      () => this.finished(lane, current),
      () => this.finished(lane, current),
    );
    return result;
  }

  private finished(lane: string, state: Lane): void {
    state.pending -= 1;
    if (state.pending === 0) this.lanes.delete(lane);
  }
}
