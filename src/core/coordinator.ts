import { run, runAtomically, type Heartbeat, type LeaseToken } from './database.js';
import type { NotifyOnCommit } from './dialect.js';
import { describeError } from './errors.js';
import { hashGroupKey } from './partitioning.js';
import { settlesWithin } from './timing.js';
import { upkeepTallies } from './tally-upkeep.js';
import { channels, emit } from './telemetry.js';
import { backgroundFailure, PartitionWorker, type WorkerDeps } from './worker/index.js';

/**
 * Holds this node's fair share of an outbox's partitions. Every `leaseTimeout / 3` it records a
 * heartbeat, counts the live relaying nodes, takes free partitions up to `ceil(partitions / nodes)`
 * and hands back any above it, so partitions spread over the nodes instead of piling onto the
 * first one. The heartbeat renews every lease the node holds on the outbox in the same statement
 * (an idle node sends one statement per outbox and tick, whatever its partition count); with
 * `notify`, it also finds partitions with a message due, and wakes their workers, which sleep
 * until a notification: the safety net of a notification missed. A worker in a long delivery
 * renews its own lease while it makes progress, so a hung worker loses its partition after
 * `leaseTimeout`.
 *
 * With `notify`, handing a partition back (and joining) sends a rebalance notification on commit,
 * so the other nodes' coordinators run a step at once ({@link rebalance}) rather than at their tick.
 */
export class OutboxCoordinator {
  readonly workers = new Map<number, PartitionWorker>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private stopped = false;
  /** Pruning and the tallies' upkeep, one after the other: the node's one housekeeping connection. */
  private housekeeping: Promise<void> | undefined;
  private lastPrune = 0;
  /** `partition:holder` of the stale leases already reported by {@link reportWaiting}. */
  private readonly reportedWaits = new Set<string>();
  /** Partitions this node has held since it started: a lease of its own that it never took here is a predecessor's. */
  private readonly heldHere = new Set<number>();
  /** A step at the moment a lease that missed its renewals lapses (see {@link stepWhenLapsed}). */
  private lapseTimer: NodeJS.Timeout | undefined;
  /** A step was asked for while one ran: run another once it ends (it may have read the leases before the change). */
  private again = false;
  /** The first heartbeat announces the node (`rebalanceNotify`): the others hand back their surplus at once. */
  private announced = false;

  constructor(
    private readonly deps: WorkerDeps,
    private readonly nodeId: string,
    private readonly prune: () => Promise<unknown>,
    /** `notify`: what a release, a join and a stop send (rebalancePayload), or none. */
    private readonly rebalanceNotify?: NotifyOnCommit,
  ) {}

  async start(): Promise<void> {
    await this.tick();
    this.timer = setInterval(() => void this.tick(), Math.max(50, Math.floor(this.deps.leaseTimeout / 3)));
  }

  wake(partition: number): void {
    this.workers.get(partition)?.wake();
  }

  /** A rebalance notification: a node released partitions, joined or left. One step now. */
  rebalance(): void {
    if (this.stopped) return;
    if (this.ticking !== undefined) this.again = true;
    else void this.tick();
  }

  /** One coordination step; errors are logged and retried at the next tick. */
  tick(): Promise<void> {
    this.ticking ??= this.coordinate()
      .catch((error: unknown) => {
        const failure = backgroundFailure(this.deps, error);
        emit(channels.error, () => ({
          instance: this.deps.instance,
          outbox: this.deps.outbox.name,
          error: failure,
        }));
        this.deps.logger.error('outboxer: partition coordination failed; retrying', {
          outbox: this.deps.outbox.name,
          error: describeError(failure, 500),
        });
      })
      .finally(() => {
        this.ticking = undefined;
        if (this.again && !this.stopped) {
          this.again = false;
          void this.tick();
        }
      });
    return this.ticking;
  }

  private async coordinate(): Promise<void> {
    if (this.stopped) return;
    const { adapter, outbox, leaseTimeout } = this.deps;
    for (const [partition, worker] of this.workers) {
      if (worker.lost) this.workers.delete(partition);
    }
    // Only idle workers: a busy one renews its own lease as it settles, and a delivery renews it
    // for at most deliveryTimeout, so that a hung relay still loses its partition.
    const held = [...this.workers.values()].filter((worker) => worker.resting);
    const announce = this.announced ? undefined : this.rebalanceNotify;
    const beat = await runAtomically(
      adapter,
      adapter.dialect.heartbeat(outbox.table, outbox.name, this.nodeId, leaseTimeout, Date.now(), {
        renew: held.map((worker) => worker.lease),
        checkDue: this.rebalanceNotify !== undefined,
        recountEvery: outbox.recountInterval,
        notify: announce,
      }),
    );
    this.announced = true;
    this.renewed(held, beat);
    const { liveNodes, leases } = beat;
    const leased = new Set(leases.filter((l) => !this.leftByPredecessor(l)).map((l) => l.partition));
    const target = Math.ceil(outbox.partitions / liveNodes);

    if (this.workers.size > target) await this.releaseExtra(this.workers.size - target);
    const free = this.preferredOrder().filter((p) => !this.workers.has(p) && !leased.has(p));
    while (!this.stopped && this.workers.size < target && free.length > 0) {
      await this.acquire(free.splice(0, target - this.workers.size));
    }
    if (this.workers.size < target) this.reportWaiting(leases);
    // At its share or not: the holder's node row lapses with its leases, and the share grows then.
    this.stepWhenLapsed(leases);
    if (!this.workers.has(0)) return;
    this.housekeeping ??= this.housekeep(beat.upkeep).finally(() => {
      this.housekeeping = undefined;
    });
  }

  /**
   * What the heartbeat's renewals found: a renewed lease counts for its worker; a lost one was
   * taken over (the worker stops, writing nothing); a partition with a message due is woken.
   */
  private renewed(held: readonly PartitionWorker[], beat: Heartbeat): void {
    const renewed = new Set(beat.renewed);
    const lost = new Set(beat.lost);
    for (const worker of held) {
      if (renewed.has(worker.partition)) worker.leaseRenewed();
      if (!lost.has(worker.partition)) continue;
      emit(channels.leaseLost, () => ({
        instance: this.deps.instance,
        outbox: this.deps.outbox.name,
        partition: worker.partition,
        epoch: worker.lease.epoch,
      }));
      worker.leaseTaken();
    }
    for (const partition of beat.due) this.workers.get(partition)?.wake();
  }

  /**
   * Says, once per partition and holder, that this node waits for a lease that was not renewed: its
   * holder renews every third of the lease, so a lease with less than two thirds left missed a
   * renewal, which is what a holder that crashed (or froze) leaves behind. Without this line a
   * restart after a crash waited up to `leaseTimeout` in silence.
   */
  private reportWaiting(leases: Heartbeat['leases']): void {
    const { outbox, leaseTimeout, logger } = this.deps;
    for (const lease of leases) {
      if (lease.owner === this.nodeId || this.workers.has(lease.partition)) continue;
      const key = `${lease.partition}:${lease.owner}`;
      if (this.reportedWaits.has(key) || lease.until - Date.now() >= (2 * leaseTimeout) / 3) continue;
      this.reportedWaits.add(key);
      logger.warn(
        `outboxer: waiting for partition ${lease.partition} of outbox "${outbox.name}": its lease is held by ${lease.owner}, which stopped renewing it (a crash, or a process that froze); it lapses at ${new Date(lease.until).toISOString()} and this node takes it over then`,
        {
          outbox: outbox.name,
          partition: lease.partition,
          holder: lease.owner,
          until: new Date(lease.until),
        },
      );
    }
  }

  /**
   * A lease of another node that lapses before the next tick (its holder missed
   * renewals, a crash most likely; a live holder renews every third of the lease, so its leases
   * always run longer than a tick) gets a step of its own just after it lapses, so a crashed
   * holder's partitions are taken `leaseTimeout` after its last renewal rather than up to a tick
   * later. Times are the database's clock, read against this process's: a skew makes the step
   * early (it finds the lease held, and the ticks go on) or late (a tick comes first).
   */
  private stepWhenLapsed(leases: Heartbeat['leases']): void {
    const tick = Math.max(50, Math.floor(this.deps.leaseTimeout / 3));
    const now = Date.now();
    const lapsing = leases.filter((l) => l.owner !== this.nodeId && l.until - now < tick).map((l) => l.until);
    if (lapsing.length === 0 || this.lapseTimer !== undefined) return;
    this.lapseTimer = setTimeout(
      () => {
        this.lapseTimer = undefined;
        this.rebalance();
      },
      Math.max(0, Math.min(...lapsing) - now) + 20,
    );
    this.lapseTimer.unref();
  }

  /**
   * A lease held under this node's own `nodeId` that this process never took: a crashed process
   * with the same identity left it, and the platform runs one process per identity, so it is taken
   * back at once. A partition this process held and lost (a delivery past `deliveryTimeout`) is
   * not: its abandoned send may still be in flight, so it waits for the lease to lapse.
   */
  private leftByPredecessor(lease: Heartbeat['leases'][number]): boolean {
    return lease.owner === this.nodeId && !this.heldHere.has(lease.partition);
  }

  /** Each node tries partitions from its own starting point, so nodes do not all race for partition 0. */
  private preferredOrder(): number[] {
    const count = this.deps.outbox.partitions;
    const start = hashGroupKey(this.nodeId) % count;
    return Array.from({ length: count }, (_, i) => (start + i) % count);
  }

  /** Takes what it can of `partitions` (free when the heartbeat read them): one statement where the dialect can. */
  private async acquire(partitions: readonly number[]): Promise<void> {
    const { adapter, outbox, leaseTimeout } = this.deps;
    const params = { outbox: outbox.name, owner: this.nodeId, ttl: leaseTimeout, now: Date.now() };
    const taken: Array<{ partition: number; epoch: number }> = [];
    if (adapter.dialect.acquireLeases !== undefined && partitions.length > 1) {
      taken.push(
        ...(await run(adapter, adapter.dialect.acquireLeases(outbox.table, { ...params, partitions }))),
      );
    } else {
      for (const partition of partitions) {
        const epoch = await run(
          adapter,
          adapter.dialect.acquireLease(outbox.table, { ...params, partition }),
        );
        if (epoch !== undefined) taken.push({ partition, epoch });
      }
    }
    for (const { partition, epoch } of taken) {
      // Stopped meanwhile: the lease lapses, or the stop's hand-back (which reads `workers`) missed it.
      if (this.stopped) return;
      const lease: LeaseToken = { outbox: outbox.name, partition, owner: this.nodeId, epoch };
      const worker = new PartitionWorker(this.deps, lease);
      this.workers.set(partition, worker);
      this.heldHere.add(partition);
      emit(channels.leaseAcquired, () => ({
        instance: this.deps.instance,
        outbox: outbox.name,
        partition,
        epoch: lease.epoch,
      }));
      worker.start();
    }
  }

  private async releaseExtra(count: number): Promise<void> {
    const extra = [...this.workers.values()].sort((a, b) => b.partition - a.partition).slice(0, count);
    await Promise.all(extra.map((worker) => this.release(worker)));
  }

  private async release(worker: PartitionWorker): Promise<void> {
    await worker.stop();
    this.workers.delete(worker.partition);
    if (worker.lost) return;
    const { adapter, outbox } = this.deps;
    await run(adapter, adapter.dialect.releaseLease(outbox.table, worker.lease, this.rebalanceNotify));
    emit(channels.leaseReleased, () => ({
      instance: this.deps.instance,
      outbox: outbox.name,
      partition: worker.partition,
      epoch: worker.lease.epoch,
    }));
  }

  /**
   * Runs on the node holding partition 0, in the background of the coordination (a long prune must
   * not hold up heartbeats), but never two statements at once: one pooled connection at most.
   */
  private async housekeep(upkeep: Heartbeat['upkeep']): Promise<void> {
    const { outbox, logger } = this.deps;
    if (outbox.retention !== 'delete' && Date.now() - this.lastPrune >= outbox.pruneInterval) {
      this.lastPrune = Date.now();
      await this.prune().catch((error: unknown) => {
        logger.error('outboxer: prune failed', {
          outbox: outbox.name,
          error: describeError(backgroundFailure(this.deps, error), 500),
        });
      });
    }
    await upkeepTallies(this.deps, upkeep).catch((error: unknown) => {
      logger.error('outboxer: upkeep of the counts() tallies failed; retrying', {
        outbox: outbox.name,
        error: describeError(backgroundFailure(this.deps, error), 500),
      });
    });
  }

  /**
   * Stops every worker, letting each finish its batch for up to `timeout` ms; past that the
   * batches are abandoned unacknowledged. Then hands the leases back so another node can take over
   * at once instead of waiting for them to expire.
   */
  async stop(timeout: number): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearTimeout(this.lapseTimer);
    await this.ticking;
    const workers = [...this.workers.values()];
    const finished = Promise.all(workers.map((w) => w.stop()));
    if (!(await settlesWithin(finished, timeout))) {
      for (const worker of workers) worker.abort();
      await settlesWithin(finished, 1000);
    }
    await this.housekeeping;
    const { adapter, outbox } = this.deps;
    try {
      for (const worker of workers) {
        if (!worker.lost) await run(adapter, adapter.dialect.releaseLease(outbox.table, worker.lease));
      }
      // Last, with the rebalance notification: the others then see the leases free and this node gone.
      await run(
        adapter,
        adapter.dialect.removeNode(outbox.table, outbox.name, this.nodeId, this.rebalanceNotify),
      );
    } catch (error) {
      // The leases expire on their own; another node takes over after leaseTimeout.
      this.deps.logger.warn('outboxer: could not hand back leases at stop', {
        outbox: outbox.name,
        error: describeError(backgroundFailure(this.deps, error), 500),
      });
    }
    this.workers.clear();
  }
}
