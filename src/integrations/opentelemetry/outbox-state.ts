/**
 * Reads the state of outboxes from the database (`counts()`, `blockedGroupCounts()` and the heads
 * of `blockedGroups()`) for gauges, at most once per interval whoever asks. Shared by `outboxer/opentelemetry` and
 * `outboxer/prometheus`; it imports neither.
 */
import { invalidOption } from '../../core/options.js';
import type { BlockedGroupCounts, BlockedGroupHead, Counts } from '../../core/api.js';

/** The part of an `Outboxer` the metrics read. */
export interface ObservedOutboxer {
  readonly settings: {
    readonly name: string;
    readonly logger?: { warn(message: string, meta?: object): void } | undefined;
  };
  /** Throws `UNKNOWN_OUTBOX` for a name that is not configured. */
  outbox(name: string): unknown;
  counts(outbox: string): Promise<Counts>;
  blockedGroupCounts(outbox: string, options: { upTo: number }): Promise<BlockedGroupCounts>;
  blockedGroups(outbox: string, options: { limit: number; waiting: false }): Promise<BlockedGroupHead[]>;
}

/** One outbox as the gauges show it. */
export interface OutboxState {
  readonly outbox: string;
  readonly counts: Counts;
  /** Groups held back by a retrying head, counted up to `blockedGroupsLimit`. */
  readonly retryingGroups: number;
  /** Groups held back by a dead head (`onDead: 'park'`), counted up to `blockedGroupsLimit`. */
  readonly parkedGroups: number;
  /** Seconds since the oldest of the first `blockedGroupsLimit` blocked heads first failed; 0 when none is blocked. */
  readonly oldestBlockedAge: number;
  /** Seconds since the oldest pending message was published; 0 when nothing is pending. */
  readonly oldestPendingAge: number;
  /** Seconds since a relaying node was last seen, or `undefined` when none ever was. */
  readonly relaySeenAge: number | undefined;
}

export interface OutboxStateOptions {
  /** Outboxes to read. Each read runs `counts()`, `blockedGroupCounts()` and `blockedGroups()` per outbox. */
  readonly outboxes: readonly string[];
  /** Milliseconds a reading is reused before the tables are read again. Default 15000. */
  readonly interval?: number;
  /**
   * Most blocked groups counted per outbox (`blockedGroupCounts`' `upTo`; on SQLite the count is
   * exact whatever it is), and the heads read for the oldest blocked age. Default 1000.
   */
  readonly blockedGroupsLimit?: number;
}

/**
 * Reads outbox state lazily: a collection (an OpenTelemetry export, a Prometheus scrape) reads the
 * tables only when the last reading is older than `interval`, and concurrent collections share one
 * read. Nothing runs when nobody collects, so there is no timer to stop.
 */
export class OutboxStateReader {
  private readonly outboxes: readonly string[];
  private readonly interval: number;
  private readonly limit: number;
  private last: { at: number; states: OutboxState[] } | undefined;
  private inFlight: Promise<OutboxState[]> | undefined;

  constructor(
    private readonly outboxer: ObservedOutboxer,
    options: OutboxStateOptions,
    private readonly clock: () => number = Date.now,
  ) {
    if (!Array.isArray(options.outboxes) || options.outboxes.length === 0)
      throw invalidOption('outboxes', 'a non-empty array of outbox names, e.g. ["orders"]', options.outboxes);
    for (const name of options.outboxes) outboxer.outbox(name); // UNKNOWN_OUTBOX now, not at the first scrape
    this.outboxes = [...new Set(options.outboxes)];
    this.interval = options.interval ?? 15_000;
    if (typeof this.interval !== 'number' || !Number.isFinite(this.interval) || this.interval < 0)
      throw invalidOption('interval', 'a number of milliseconds, 0 or more', options.interval);
    this.limit = options.blockedGroupsLimit ?? 1000;
    if (!Number.isInteger(this.limit) || this.limit < 1)
      throw invalidOption('blockedGroupsLimit', 'a positive integer', options.blockedGroupsLimit);
  }

  get outboxNames(): readonly string[] {
    return this.outboxes;
  }

  /**
   * The state of every outbox, read now unless the last reading is recent. An outbox whose read
   * failed (database down) is left out, so its gauges go absent instead of showing stale values.
   */
  async read(): Promise<OutboxState[]> {
    const now = this.clock();
    if (this.last !== undefined && now - this.last.at < this.interval) return this.last.states;
    this.inFlight ??= this.readAll().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private async readAll(): Promise<OutboxState[]> {
    const states: OutboxState[] = [];
    for (const outbox of this.outboxes) {
      try {
        states.push(await this.readOne(outbox));
      } catch (error) {
        this.outboxer.settings.logger?.warn('outboxer: metrics could not read the outbox', {
          outbox,
          error: String(error),
        });
      }
    }
    this.last = { at: this.clock(), states };
    return states;
  }

  private async readOne(outbox: string): Promise<OutboxState> {
    const counts = await this.outboxer.counts(outbox);
    // Counted from the blocking index, and the heads without what waits behind them: what the
    // dashboard reads, the same at any depth of backlog.
    const { retrying, parked } = await this.outboxer.blockedGroupCounts(outbox, { upTo: this.limit });
    const blocked =
      retrying + parked === 0
        ? []
        : await this.outboxer.blockedGroups(outbox, { limit: this.limit, waiting: false });
    const now = this.clock();
    const ageOf = (date: Date | null): number =>
      date === null ? 0 : Math.max(0, (now - date.getTime()) / 1000);
    const since = blocked
      .map((group) => group.blockedSince)
      .filter((date): date is Date => date !== null)
      .map((date) => date.getTime());
    return {
      outbox,
      counts,
      retryingGroups: Math.min(retrying, this.limit),
      parkedGroups: Math.min(parked, this.limit),
      oldestBlockedAge: since.length === 0 ? 0 : ageOf(new Date(Math.min(...since))),
      oldestPendingAge: ageOf(counts.oldestPendingAt),
      relaySeenAge: counts.relaySeenAt === null ? undefined : ageOf(counts.relaySeenAt),
    };
  }
}
