import type { LeaseToken } from './dialect.js';
import type { Ordering } from './options.js';
import type { StatusValue } from './sql.js';

/**
 * The shapes of a poll (see `Dialect.poll` and `acknowledgeAndPoll`): what it is asked, and the
 * messages, cursor start and next retry it reports. Kept beside dialect.ts, which re-exports them.
 */

export interface PollParams {
  /**
   * The process clock (Unix milliseconds) for dialects that keep time in the rows (SQLite); a
   * dialect whose server has a clock of its own (Postgres) uses that one. Passed in, so that a
   * dialect stays a pure function of its arguments.
   */
  readonly now: number;
  readonly lease: LeaseToken;
  readonly ordering: Ordering;
  readonly limit: number;
  /** Only ready messages with a larger id (see docs/ordering.md, "the cursor"). */
  readonly afterId: number;
  /**
   * Where a database has concurrent writers (Postgres): transactions that were writing when the
   * cursor moved past ids, each with the cursor to go back to once it has ended, since it may have
   * committed messages below the cursor. The poll starts from the lowest such cursor of the ended
   * ones, decided on its own snapshot, and reports where it started and the writing transactions
   * of its snapshot ({@link PollStart}).
   */
  readonly watch?: PollWatch;
  /**
   * The partition's rewind count as the worker last saw it (`undefined` before its first poll).
   * Statements outside the worker that make messages ready again below its cursor (`discard()`
   * releasing a group, `retryDead()`) count a rewind on the outbox's lease rows in their own
   * transaction ({@link Dialect.countRewind}); a poll that sees a count other than this one starts
   * from the beginning. It reports the count and where it started ({@link PollStart}).
   */
  readonly rewindsSeen?: number;
  /** Treat retries due before this time as due; `null` = now; `Infinity` = all (manual testing). */
  readonly dueBefore: Date | null | 'infinity';
  /** `onDead: 'park'`: a dead message blocks its group like a retrying one. */
  readonly parkDead: boolean;
  /**
   * Ids the poll leaves out whichever branch would return them: messages in flight (being
   * delivered, or acknowledged by the same statement, whose snapshot still shows them). Only
   * dialects with {@link Dialect.acknowledgeAndPoll} take it; others refuse it.
   */
  readonly exclude?: readonly number[];
  /**
   * A notify payload (`notify`, Postgres): the poll also reports whether any transaction that
   * publishes with this payload was in flight ({@link PollResult.publishersQuiet} false when one
   * was). Tested after the poll's snapshot was taken, so a poll that follows a quiet one sees every
   * message whose NOTIFY was left out in favour of one the worker has already received.
   */
  readonly checkPublishers?: string;
  /**
   * With `DialectCapabilities.readyOnlyPoll`, `group` or `none` ordering: read the ready rows
   * alone, without the branch of due retries and the probe for a blocked group, when the poll's
   * snapshot shows that neither could find anything; otherwise return no message. So the rows
   * returned are always the full poll's, and an empty result means "poll in full".
   */
  readonly readyOnly?: boolean;
}

export interface PollWatch {
  /** Transaction ids (xid8 as text). */
  readonly xids: readonly string[];
  /** The cursor to go back to when the transaction of the same index has ended. */
  readonly rewindTo: readonly number[];
}

/** A message as a poll or a listing reads it, with the engine's bookkeeping. */
export interface PolledEnvelope {
  readonly id: number;
  readonly outbox: string;
  readonly type: string | null;
  readonly groupKey: string | null;
  readonly partition: number;
  readonly payload: unknown;
  readonly headers: Record<string, string>;
  readonly attempts: number;
  readonly lastError: string | null;
  readonly nextAttemptAt: Date | null;
  readonly failingSince: Date | null;
  readonly insertedAt: Date;
  /** Internal: the status the message had when read. */
  readonly status: StatusValue;
  /** Internal: a ready message whose group is blocked by a retrying head. */
  readonly blocked: boolean;
}

/**
 * A polled message, read as far as choosing a batch needs: a round chooses its batch from these,
 * and reads only what it delivers into envelopes, a slice at a time.
 */
export interface PolledMessage {
  readonly id: number;
  readonly status: StatusValue;
  /** A ready message whose group is blocked by a retrying (or parked) head. */
  readonly blocked: boolean;
  readonly groupKey: string | null;
  /** The whole row: its headers parsed, its payload parsed on first read (core/payload.ts). */
  envelope(): PolledEnvelope;
}

/** Where a poll started, on dialects that keep a cursor (`DialectCapabilities.pollCursor`). */
export interface PollStart {
  /** The cursor the poll read after. */
  readonly afterId: number;
  /** The writing transactions of the poll's snapshot (xid8 as text). */
  readonly inFlight: readonly string[];
  /** The partition's rewind count, when the poll was asked to watch it. */
  readonly rewinds: number | undefined;
}

export interface PollResult {
  /** In id order. */
  readonly messages: readonly PolledMessage[];
  /** `undefined` on dialects without a cursor. */
  readonly start: PollStart | undefined;
  /** With {@link PollParams.checkPublishers}: no publishing transaction was in flight. */
  readonly publishersQuiet: boolean;
  /**
   * When the poll found nothing, on a dialect that reads it with the poll: what `nextRetryAt` would
   * return, on the poll's snapshot, so an idle worker sends one statement per sleep instead of two.
   * `undefined` otherwise: the worker asks `nextRetryAt`.
   */
  readonly nextRetry?: NextRetry | undefined;
}
/** An acknowledgement with the next poll: `undefined` when the lease was lost (nothing written). */
export type AcknowledgedPoll = PollResult | undefined;
export interface NextRetry {
  /** Unix milliseconds of the partition's earliest retry, or `null` when none waits. */
  readonly at: number | null;
  /** The database's clock, Unix milliseconds, to measure `at` against. */
  readonly now: number;
}
