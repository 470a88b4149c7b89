import type { LeaseToken } from '../dialect.js';
import { run } from '../database.js';
import { LeaseLostError } from '../errors.js';
import { channels, emit } from '../telemetry.js';
import type { WorkerDeps } from './deps.js';

/**
 * A partition's lease between rounds: when it was last counted as renewed, a renewal once half of
 * it has passed (the coordinator's heartbeat renews every lease of the node each third, so this
 * renews only when that did not happen), and whether it may have run out. During delivery, {@link keepLeaseDuringDelivery}
 * renews it.
 */
export class LeaseKeeper {
  private lastRenewed = Date.now();

  constructor(
    private readonly deps: WorkerDeps,
    private readonly lease: LeaseToken,
  ) {}

  /** Counts the lease as renewed now: after a round that settled a batch with the lease held. */
  renewed(): void {
    this.lastRenewed = Date.now();
  }

  /** Not renewed for a whole lease period: another node may own the partition now. */
  expired(): boolean {
    return Date.now() - this.lastRenewed > this.deps.leaseTimeout;
  }

  /** Renews the lease once half of it has passed since the last renewal; false when it was lost. */
  async renewIfDue(): Promise<boolean> {
    if (Date.now() - this.lastRenewed < this.deps.leaseTimeout / 2) return true;
    const { adapter, outbox } = this.deps;
    const statement = adapter.dialect.renewLease(
      outbox.table,
      this.lease,
      this.deps.leaseTimeout,
      Date.now(),
    );
    if (!(await run(adapter, statement))) {
      emit(channels.leaseLost, () => ({
        instance: this.deps.instance,
        outbox: outbox.name,
        partition: this.lease.partition,
        epoch: this.lease.epoch,
      }));
      return false;
    }
    this.lastRenewed = Date.now();
    return true;
  }
}

/**
 * Renews the lease every `leaseTimeout / 3` while the relay works, for at most the outbox's
 * `deliveryTimeout`. The returned signal aborts when that time is up (the renewals stop, so a hung
 * relay loses its partition a lease period later) or when a renewal finds the partition taken.
 * The first renewal waits for the statement the round runs during delivery (a few milliseconds), so
 * that a partition never holds two pooled connections at once.
 */
export function keepLeaseDuringDelivery(
  deps: WorkerDeps,
  lease: LeaseToken,
  databaseWork: Promise<unknown>,
): { signal: AbortSignal; stop(): Promise<void> } {
  const { adapter, outbox, leaseTimeout } = deps;
  const controller = new AbortController();
  let renewing: Promise<void> = databaseWork.then(() => undefined);
  const renew = () => {
    renewing = renewing.then(async () => {
      try {
        const statement = adapter.dialect.renewLease(outbox.table, lease, leaseTimeout, Date.now());
        if (!(await run(adapter, statement)))
          controller.abort(new LeaseLostError(outbox.name, lease.partition));
      } catch {
        // The database is unreachable: the settle will find out; the lease may run out meanwhile.
      }
    });
  };
  const interval = setInterval(renew, Math.max(10, Math.floor(leaseTimeout / 3)));
  const deadline = setTimeout(() => {
    clearInterval(interval);
    controller.abort(
      new Error(
        `delivery took longer than outboxes.${outbox.name}.deliveryTimeout (${outbox.deliveryTimeout} ms)`,
      ),
    );
  }, outbox.deliveryTimeout);
  return {
    signal: controller.signal,
    async stop() {
      clearInterval(interval);
      clearTimeout(deadline);
      await renewing;
    },
  };
}

/** A write of the round found the lease gone (nothing was written): reports it; false. */
export function leaseLost(deps: WorkerDeps, lease: LeaseToken): false {
  const { outbox } = deps;
  emit(channels.leaseLost, () => ({
    instance: deps.instance,
    outbox: outbox.name,
    partition: lease.partition,
    epoch: lease.epoch,
  }));
  deps.logger.warn('outboxer: partition taken over during delivery; the batch was not acknowledged', {
    outbox: outbox.name,
    partition: lease.partition,
  });
  return false;
}
