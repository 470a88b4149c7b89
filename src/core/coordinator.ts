import { run, runAtomically, type Heartbeat, type LeaseToken } from './database.js';
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
 * first one. A partition's worker renews its own lease as it makes progress, so a hung worker
 * loses its partition after `leaseTimeout`.
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

  constructor(
    private readonly deps: WorkerDeps,
    private readonly nodeId: string,
    private readonly prune: () => Promise<unknown>,
  ) {}

  async start(): Promise<void> {
    await this.tick();
    this.timer = setInterval(() => void this.tick(), Math.max(50, Math.floor(this.deps.leaseTimeout / 3)));
  }

  wake(partition: number): void {
    this.workers.get(partition)?.wake();
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
      });
    return this.ticking;
  }

  private async coordinate(): Promise<void> {
    if (this.stopped) return;
    const { adapter, outbox, leaseTimeout } = this.deps;
    for (const [partition, worker] of this.workers) {
      if (worker.lost) this.workers.delete(partition);
    }
    const { liveNodes, leases } = await runAtomically(
      adapter,
      adapter.dialect.heartbeat(outbox.table, outbox.name, this.nodeId, leaseTimeout, Date.now()),
    );
    const leased = new Set(leases.filter((l) => !this.leftByPredecessor(l)).map((l) => l.partition));
    const target = Math.ceil(outbox.partitions / liveNodes);

    if (this.workers.size > target) await this.releaseExtra(this.workers.size - target);
    for (const partition of this.preferredOrder()) {
      if (this.stopped || this.workers.size >= target) break;
      if (this.workers.has(partition) || leased.has(partition)) continue;
      await this.acquire(partition);
    }
    if (this.workers.size < target) this.reportWaiting(leases);
    if (!this.workers.has(0)) return;
    this.housekeeping ??= this.housekeep().finally(() => {
      this.housekeeping = undefined;
    });
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

  private async acquire(partition: number): Promise<void> {
    const { adapter, outbox, leaseTimeout } = this.deps;
    const epoch = await run(
      adapter,
      adapter.dialect.acquireLease(outbox.table, {
        outbox: outbox.name,
        partition,
        owner: this.nodeId,
        ttl: leaseTimeout,
        now: Date.now(),
      }),
    );
    if (epoch === undefined || this.stopped) return;
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

  private async releaseExtra(count: number): Promise<void> {
    const extra = [...this.workers.values()].sort((a, b) => b.partition - a.partition).slice(0, count);
    await Promise.all(extra.map((worker) => this.release(worker)));
  }

  private async release(worker: PartitionWorker): Promise<void> {
    await worker.stop();
    this.workers.delete(worker.partition);
    if (worker.lost) return;
    const { adapter, outbox } = this.deps;
    await run(adapter, adapter.dialect.releaseLease(outbox.table, worker.lease));
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
  private async housekeep(): Promise<void> {
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
    await upkeepTallies(this.deps).catch((error: unknown) => {
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
      await run(adapter, adapter.dialect.removeNode(outbox.table, outbox.name, this.nodeId));
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
