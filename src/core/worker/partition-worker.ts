import type { LeaseToken } from '../dialect.js';
import { describeError } from '../errors.js';
import { channels, emit } from '../telemetry.js';
import { PollCursor } from './cursor.js';
import { backgroundFailure, type WorkerDeps } from './deps.js';
import { LeaseKeeper } from './lease-keeper.js';
import { ReadyOnlyPolls } from './ready-only.js';
import { idleDelay, Pipeline, runRound, writeDeferred } from './round.js';

/**
 * Delivers one partition while it holds the lease: rounds back to back while there is work, a
 * wait of `pollInterval` (or until the next retry is due, or a NOTIFY) when there is none; with
 * `notify` and its listener connected, no `pollInterval`: until a NOTIFY, a retry due, or the
 * coordinator's wake-up. The loop sleeps, wakes, backs off and stops; what a round does is the
 * round's (round.ts), the lease between rounds is the keeper's (lease-keeper.ts) and, while the
 * worker sleeps, the coordinator's heartbeat renews it ({@link leaseRenewed}, {@link leaseTaken}).
 */
export class PartitionWorker {
  private readonly stopController = new AbortController();
  private readonly cursor: PollCursor;
  private readonly pipeline = new Pipeline();
  private readonly readyOnly: ReadyOnlyPolls;
  private readonly keeper: LeaseKeeper;
  private wakeUp: (() => void) | undefined;
  private woken = false;
  private finished: Promise<void> | undefined;
  /** Set when the worker ended because another node owns the partition now. */
  lost = false;

  constructor(
    private readonly deps: WorkerDeps,
    readonly lease: LeaseToken,
  ) {
    this.keeper = new LeaseKeeper(deps, lease);
    this.cursor = new PollCursor(deps.outbox.pollInterval, deps.adapter.dialect.capabilities.pollCursor);
    this.readyOnly = ReadyOnlyPolls.for(deps.adapter.dialect, deps.outbox);
  }

  get partition(): number {
    return this.lease.partition;
  }

  start(): void {
    this.finished ??= this.loop();
  }

  /** Asleep between rounds, idle: the coordinator's heartbeat renews its lease. */
  get resting(): boolean {
    return this.wakeUp !== undefined;
  }

  /** The coordinator's heartbeat renewed the lease. */
  leaseRenewed(): void {
    this.keeper.renewed();
  }

  /**
   * The coordinator's heartbeat found the lease taken over: stop without writing anything more
   * (the round in flight is fenced on the lease and writes nothing either).
   */
  leaseTaken(): void {
    this.taken = true;
    this.stopping = true;
    this.wake();
  }

  private taken = false;

  /** Poll now (a NOTIFY arrived). */
  wake(): void {
    this.notifications += 1;
    this.woken = true;
    this.wakeUp?.();
  }

  private notifications = 0;
  private publishersBackoff = 1;

  /**
   * How long to wait before polling again for publishers in flight: 1 ms, doubling up to 50 ms (or
   * the poll interval): a publisher's transaction usually commits within a millisecond, but one
   * that publishes early in a long transaction must not make the worker poll flat out.
   */
  private untilPublishersCommit(): number {
    const delay = this.publishersBackoff;
    this.publishersBackoff = Math.min(this.publishersBackoff * 2, 50, this.deps.outbox.pollInterval);
    return delay;
  }

  /** Finish the batch in flight, then stop. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    await this.finished;
  }

  /** Abandon the batch in flight: it will not be acknowledged. */
  abort(): void {
    this.stopping = true;
    this.stopController.abort(new Error('outboxer is stopping'));
    this.wake();
  }

  get done(): Promise<void> {
    return this.finished ?? Promise.resolve();
  }

  private stopping = false;

  private async loop(): Promise<void> {
    const { outbox, logger } = this.deps;
    let failures = 0;
    /** The notifications counted when the last poll found publishers quiet (`notify`). */
    let quietAsOf: number | undefined;
    while (!this.stopping) {
      try {
        // Before every round, after a sleep of any length too: the coordinator renews the lease
        // of an idle worker; this renews it when neither it nor a settle has for half a lease
        // (a full page with every row blocked and held renews nothing: a backlog behind a
        // retrying head outlasted the lease while the worker held it).
        if (!(await this.keeper.renewIfDue())) {
          this.lost = true;
          return;
        }
        const notifications = this.notifications;
        const round = await runRound(this.deps, {
          lease: this.lease,
          cursor: this.cursor,
          dueBefore: null,
          signal: this.stopController.signal,
          pipeline: this.pipeline,
          readyOnly: this.readyOnly,
        });
        failures = 0;
        if (round.settlement !== undefined && !round.leaseLost) this.keeper.renewed();
        if (round.leaseLost) {
          this.lost = true;
          return;
        }
        const mayRest = quietAsOf !== undefined && quietAsOf === this.notifications;
        quietAsOf = round.publishersQuiet ? notifications : undefined;
        if (round.settlement !== undefined) this.publishersBackoff = 1;
        if (round.full) continue;
        if (outbox.notify && !mayRest) {
          // A publisher may have left its NOTIFY out to one this worker already received, and not
          // have committed yet: poll again soon rather than wait for a notification. Once a poll
          // finds publishers quiet, the next one may wait.
          if (quietAsOf === undefined) await this.sleep(this.untilPublishersCommit());
          continue;
        }
        this.publishersBackoff = 1;
        await this.sleep(await idleDelay(this.deps, this.partition, round.nextRetry));
      } catch (error) {
        // Database down or a statement failed: log, back off, try again. What was not acknowledged
        // (a deferred settlement included) is delivered again, so the next poll starts from the
        // beginning: the cursor may already be past rows this round neither delivered nor held.
        this.cursor.restart();
        this.pipeline.drop();
        quietAsOf = undefined;
        failures += 1;
        const failure = backgroundFailure(this.deps, error);
        emit(channels.error, () => ({
          instance: this.deps.instance,
          outbox: outbox.name,
          partition: this.partition,
          error: failure,
        }));
        logger.error('outboxer: relay round failed; retrying', {
          outbox: outbox.name,
          partition: this.partition,
          error: describeError(failure, 500),
        });
        await this.sleep(Math.min(outbox.pollInterval * 2 ** Math.min(failures - 1, 6), 30_000));
        if (this.keeper.expired()) {
          this.lost = true; // Could not renew in time: another node may own it now.
          return;
        }
      }
    }
    if (this.taken) {
      this.lost = true;
      return;
    }
    await this.writeOnStop();
  }

  /** Stopping with a delivered batch whose acknowledgement was to ride on the next poll: write it. */
  private async writeOnStop(): Promise<void> {
    try {
      await writeDeferred(this.deps, { lease: this.lease, cursor: this.cursor, pipeline: this.pipeline });
    } catch (error) {
      // Not acknowledged: the partition's next owner delivers the batch again.
      this.deps.logger.error('outboxer: acknowledging the last batch failed on stop', {
        outbox: this.deps.outbox.name,
        partition: this.partition,
        error: describeError(backgroundFailure(this.deps, error), 500),
      });
    }
  }

  /** Until `ms` have passed or {@link wake}; without `ms`, until woken. */
  private sleep(ms: number | undefined): Promise<void> {
    if (this.woken || this.stopping) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        this.woken = false;
        resolve();
      };
      const timer = ms === undefined ? undefined : setTimeout(done, ms);
      this.wakeUp = done;
    });
  }
}
