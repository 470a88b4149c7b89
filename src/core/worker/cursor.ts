import type { PollWatch, PolledMessage } from '../dialect.js';
import { Status } from '../sql.js';

/**
 * Poll position of a partition. Polls start after the last ready id handed out, so they never
 * step over the index entries that deleted rows leave behind until vacuum; a poll that finds less
 * than a full batch keeps the cursor too. They restart from the beginning after held rows were
 * released, when a statement outside the worker made messages ready below the cursor (it counts a
 * rewind on the lease row, which the poll reads: see `PollParams.rewindsSeen`), and at least once
 * per poll interval. Where the dialect keeps no cursor (`capabilities.pollCursor` false: SQLite,
 * whose deletes take their index entries with them), every poll starts from the beginning.
 *
 * A transaction in flight when the cursor moved past ids may commit messages below it later (ids
 * are drawn at insert, not at commit), and a later message of the same group could then be polled
 * first. So where the database reports them (Postgres), the cursor watches the transactions each
 * poll saw in flight when it moved on, and the first poll whose snapshot sees one of them ended
 * starts again from where the cursor was before that move (see docs/ordering.md, "the cursor").
 */
export class PollCursor {
  private afterId = 0;
  private restartedAt = Date.now();
  private rewinds: number | undefined;
  /** Transaction id → the cursor before the first move made while it was in flight. */
  private readonly watched = new Map<string, number>();

  constructor(
    private readonly restartEvery: number,
    private readonly keeps = true,
  ) {}

  next(): number {
    if (!this.keeps) return 0;
    if (Date.now() - this.restartedAt >= this.restartEvery) this.restart();
    return this.afterId;
  }

  /** Where the cursor stands, without the periodic restart. */
  current(): number {
    return this.afterId;
  }

  watch(): PollWatch {
    return { xids: [...this.watched.keys()], rewindTo: [...this.watched.values()] };
  }

  /** The lease row's rewind count as last polled. */
  rewindsSeen(): number | undefined {
    return this.rewinds;
  }

  /**
   * What a poll reported: where it really started (lower than asked when a watched transaction had
   * ended or a rewind was counted) and the rewind count it saw.
   */
  polled(startedAt: number, rewinds?: number): void {
    if (rewinds !== undefined) this.rewinds = rewinds;
    if (startedAt >= this.afterId) return;
    this.afterId = startedAt;
    for (const [xid, rewindTo] of this.watched) if (rewindTo >= startedAt) this.watched.delete(xid);
  }

  advance(to: number, inFlight: readonly string[] = [], from = this.afterId): void {
    if (!this.keeps || to <= this.afterId) return;
    for (const xid of inFlight) this.watched.set(xid, Math.min(this.watched.get(xid) ?? from, from));
    this.afterId = to;
  }

  rewind(to: number): void {
    this.afterId = Math.min(this.afterId, to);
  }

  restart(): void {
    this.afterId = 0;
    this.restartedAt = Date.now();
    this.watched.clear();
  }
}

/** Where a message stands, as the cursor sees it. */
export type Positioned = Pick<PolledMessage, 'id' | 'status' | 'blocked'>;

/**
 * Moves the cursor past the ready rows a poll handed out, whether or not the batch was full: the
 * late-commit watch covers what commits below it, so the next poll does not walk the index
 * entries of the delivered rows again.
 */
export function advanceCursor(
  cursor: PollCursor,
  polled: readonly Positioned[],
  batch: readonly Positioned[],
  inFlight: readonly string[] = [],
): void {
  const ready = polled.filter((m) => m.status === Status.ready);
  if (ready.length === 0) return;
  // Ready rows polled but left out of the batch come back next time: stop the cursor before them.
  const inBatch = new Set(batch.map((m) => m.id));
  const leftOut = ready.filter((m) => !m.blocked && !inBatch.has(m.id));
  const lastReady = Math.max(...ready.map((m) => m.id));
  cursor.advance(leftOut.length > 0 ? Math.min(...leftOut.map((m) => m.id)) - 1 : lastReady, inFlight);
}

/** Moves the cursor back before the ready messages among these, which the next poll must read again. */
export function rewindBefore(cursor: PollCursor, messages: readonly Positioned[]): void {
  const ready = messages.filter((m) => m.status === Status.ready);
  if (ready.length > 0) cursor.rewind(Math.min(...ready.map((m) => m.id)) - 1);
}
