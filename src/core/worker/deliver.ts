import type { LeaseToken, PolledEnvelope } from '../dialect.js';
import { relayEnvelope } from '../payload.js';
import type { DeliveryOutcome } from '../relay.js';
import { normalizeOutcomes, planSettlement, type Settlement } from '../settlement.js';
import { channels, emit } from '../telemetry.js';
import type { WorkerDeps } from './deps.js';
import { keepLeaseDuringDelivery } from './lease-keeper.js';

/**
 * Hands a batch to the relay while the lease is kept, and plans what to write from its outcome;
 * `undefined` when the worker was stopped mid-batch (nothing is acknowledged).
 */
export async function deliver(
  deps: WorkerDeps,
  options: { readonly lease: LeaseToken; readonly signal: AbortSignal },
  batch: PolledEnvelope[],
  databaseWork: Promise<unknown>,
): Promise<Settlement | undefined> {
  const { outbox, destination } = deps;
  const started = performance.now();
  emit(channels.batchStart, () => ({
    instance: deps.instance,
    outbox: outbox.name,
    partition: options.lease.partition,
    size: batch.length,
    messages: batch.map(relayEnvelope),
  }));

  const keeper = keepLeaseDuringDelivery(deps, options.lease, databaseWork);
  const signal = AbortSignal.any([options.signal, keeper.signal]);
  let result: { returned: readonly DeliveryOutcome[] | void } | { thrown: unknown };
  try {
    result = {
      returned: await destination.deliver(batch.map(relayEnvelope), {
        outbox: outbox.name,
        partition: options.lease.partition,
        ordering: outbox.ordering,
        signal,
      }),
    };
  } catch (error) {
    result = { thrown: error };
  } finally {
    await keeper.stop();
  }
  if (options.signal.aborted) {
    // Stopped mid-batch: acknowledge nothing; the next owner delivers the batch again.
    emit(channels.batchStop, () => ({
      instance: deps.instance,
      outbox: outbox.name,
      partition: options.lease.partition,
      size: batch.length,
      delivered: 0,
      failed: 0,
      aborted: true,
      duration: performance.now() - started,
    }));
    return undefined;
  }
  const settlement = planSettlement(batch, normalizeOutcomes(batch, result), outbox, deps.maxErrorLength);
  emit(channels.batchStop, () => ({
    instance: deps.instance,
    outbox: outbox.name,
    partition: options.lease.partition,
    size: batch.length,
    delivered: settlement.delivered.length,
    failed: settlement.failed.length,
    aborted: false,
    duration: performance.now() - started,
  }));
  return settlement;
}
