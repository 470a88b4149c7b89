import type { LeaseToken, SettleParams } from '../dialect.js';
import type { Settlement } from '../settlement.js';
import { channels, emit } from '../telemetry.js';
import type { PollCursor } from './cursor.js';
import type { WorkerDeps } from './deps.js';
import { leaseLost } from './lease-keeper.js';

export function settleParams(deps: WorkerDeps, lease: LeaseToken, settlement: Settlement): SettleParams {
  return {
    now: Date.now(),
    lease,
    delivered: settlement.delivered.map((m) => m.id),
    failed: settlement.failed,
    unblockedGroups: settlement.unblockedGroups,
    keep: deps.outbox.retention !== 'delete',
    ttl: deps.leaseTimeout,
    parkDead: deps.outbox.onDead === 'park',
  };
}

/** Writes the settlement in one transaction fenced on the lease; false when the lease was lost. */
export async function settle(
  deps: WorkerDeps,
  options: { readonly lease: LeaseToken; readonly cursor: PollCursor },
  settlement: Settlement,
): Promise<boolean> {
  const { lease } = options;
  const { adapter, outbox } = deps;
  const batch = adapter.dialect.settle(outbox.table, settleParams(deps, lease, settlement));
  // One statement (the common case) runs on its own: no BEGIN/COMMIT round trips.
  const result =
    batch.length === 1
      ? batch.read([await adapter.execute(batch[0]!)])
      : batch.read(await adapter.executeAtomically(batch));
  if (!result.leaseHeld) return leaseLost(deps, lease);
  reportSettlement(deps, lease, settlement, result.released, options.cursor);
  return true;
}

/** Telemetry of a written settlement; moves the cursor back before rows released from `held`. */
function reportSettlement(
  deps: WorkerDeps,
  lease: LeaseToken,
  settlement: Settlement,
  released: readonly number[],
  cursor: PollCursor,
): void {
  const { outbox } = deps;
  for (const groupKey of settlement.unblockedGroups) {
    emit(channels.groupUnblocked, () => ({
      instance: deps.instance,
      outbox: outbox.name,
      partition: lease.partition,
      groupKey,
    }));
  }
  if (settlement.unblockedGroups.length > 0) {
    if (released.length > 0) cursor.rewind(Math.min(...released) - 1);
  }
  for (const failure of settlement.failed) {
    if (settlement.newlyBlocked.includes(failure.envelope)) {
      emit(channels.groupBlocked, () => ({
        instance: deps.instance,
        outbox: outbox.name,
        partition: lease.partition,
        groupKey: failure.envelope.groupKey,
        headId: failure.id,
        parked: failure.dead,
        error: failure.error,
      }));
    }
    const channel = failure.dead ? channels.messageDead : channels.messageRetry;
    emit(channel, () => ({
      instance: deps.instance,
      outbox: outbox.name,
      partition: lease.partition,
      id: failure.id,
      groupKey: failure.envelope.groupKey,
      attempts: failure.envelope.attempts + 1,
      error: failure.error,
      ...(failure.dead ? {} : { delay: failure.delay }),
    }));
    if (failure.dead)
      deps.logger.warn('outboxer: message is dead', {
        outbox: outbox.name,
        id: failure.id,
        error: failure.error,
      });
  }
  // One line a round, not one a message: a destination that is down fails every group's head.
  const retried = settlement.failed.filter((f) => !f.dead);
  if (retried.length > 0) {
    deps.logger.warn('outboxer: delivery failed; will retry', {
      outbox: outbox.name,
      partition: lease.partition,
      messages: retried.length,
      firstId: retried[0]!.id,
      attempts: retried[0]!.envelope.attempts + 1,
      error: retried[0]!.error,
    });
  }
}
