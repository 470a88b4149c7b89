import type { Dialect, PolledMessage } from '../dialect.js';
import type { ResolvedOutbox } from '../options.js';
import { Status } from '../sql.js';

/** Full polls after a ready-only poll came back empty before the next is tried. */
const BACKOFF = 8;

/**
 * Whether the next poll of a partition should be ready-only (`PollParams.readyOnly`): a guess from
 * what the last polls found, never a rule of correctness, since a ready-only poll returns the full
 * poll's rows or none. Tried while ready-only polls return rows, and after a full poll whose rows
 * were all ready and none blocked; after one came back empty (the backlog ended, or the outbox
 * holds a retrying or blocking message), only after {@link BACKOFF} full polls, so an outbox with
 * a blocked group elsewhere costs one extra statement in nine polls at most.
 */
export class ReadyOnlyPolls {
  private worthTrying = false;
  private fullPollsToWait = 0;

  constructor(private readonly enabled: boolean) {}

  /** Ready-only polls where the dialect takes them and the ordering has guards to skip. */
  static for(dialect: Dialect, outbox: ResolvedOutbox): ReadyOnlyPolls {
    return new ReadyOnlyPolls(dialect.capabilities.readyOnlyPoll && outbox.ordering !== 'total');
  }

  next(): boolean {
    return this.worthTrying;
  }

  /** What a poll of either kind returned. */
  polled(readyOnly: boolean, messages: readonly PolledMessage[]): void {
    if (!this.enabled) return;
    if (readyOnly) {
      this.worthTrying = messages.length > 0;
      if (!this.worthTrying) this.fullPollsToWait = BACKOFF;
      return;
    }
    if (this.fullPollsToWait > 0) {
      this.fullPollsToWait -= 1;
      return;
    }
    this.worthTrying = messages.length > 0 && messages.every((m) => m.status === Status.ready && !m.blocked);
  }
}
