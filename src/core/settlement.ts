import { backoffDelay } from './backoff.js';
import type { FailedMessage, PolledEnvelope } from './database.js';
import { describeError } from './errors.js';
import type { ResolvedOutbox } from './options.js';
import { orderingKey, SKIPPED, type DeliveryOutcome } from './relay.js';
import { Status } from './database.js';

/** What to write after a batch: which messages are acknowledged, which failed, which groups unblock. */
export interface Settlement {
  readonly delivered: PolledEnvelope[];
  readonly failed: Array<FailedMessage & { readonly envelope: PolledEnvelope; readonly cause: unknown }>;
  /** Messages left untouched because an earlier message of their group failed in this batch. */
  readonly skipped: PolledEnvelope[];
  readonly unblockedGroups: string[];
  /** Failed messages whose group is held back from now on (first failure of a group's head, or a parked head). */
  readonly newlyBlocked: PolledEnvelope[];
}

/**
 * Everything delivered, nothing failed, no group unblocked: the acknowledgement can ride on a poll
 * (`Dialect.acknowledgeAndPoll`). Takes a {@link Settlement} or the `SettleParams` written from one,
 * so that the engine and a dialect decide it alike.
 */
export function isAcknowledgeOnly(settlement: {
  readonly delivered: readonly unknown[];
  readonly failed: readonly unknown[];
  readonly unblockedGroups: readonly unknown[];
}): boolean {
  return (
    settlement.failed.length === 0 &&
    settlement.unblockedGroups.length === 0 &&
    settlement.delivered.length > 0
  );
}

/** Turns whatever `relay.deliver` produced into one outcome per message. */
export function normalizeOutcomes(
  batch: readonly PolledEnvelope[],
  result: { returned: readonly DeliveryOutcome[] | void } | { thrown: unknown },
): DeliveryOutcome[] {
  if ('thrown' in result) return batch.map(() => ({ ok: false, error: result.thrown }));
  const returned = result.returned;
  if (returned === undefined) return batch.map(() => ({ ok: true }));
  if (!Array.isArray(returned) || returned.length !== batch.length) {
    const error = new Error(
      `Relay returned ${Array.isArray(returned) ? returned.length : typeof returned} outcomes for a batch of ${batch.length}; nothing of the batch counts as delivered.`,
    );
    return batch.map(() => ({ ok: false, error }));
  }
  return returned as DeliveryOutcome[];
}

/**
 * The order rule, applied whatever the relay reported: walking the batch in id order, once a
 * message of a group failed, no later message of that group counts as delivered (it is left as it
 * was, and waits behind the failure).
 */
export function planSettlement(
  batch: readonly PolledEnvelope[],
  outcomes: readonly DeliveryOutcome[],
  outbox: ResolvedOutbox,
  maxErrorLength: number,
  random: () => number = Math.random,
): Settlement {
  const settlement: Settlement = {
    delivered: [],
    failed: [],
    skipped: [],
    unblockedGroups: [],
    newlyBlocked: [],
  };
  const park = outbox.onDead === 'park';
  const now = Date.now();
  const failedKeys = new Set<string>();
  const unblocked = new Set<string>();
  const groupMode = outbox.ordering === 'group';
  batch.forEach((envelope, index) => {
    const outcome = outcomes[index]!;
    const key = orderingKey(envelope, outbox.ordering);
    if (key !== null && failedKeys.has(key)) {
      settlement.skipped.push(envelope);
      return;
    }
    if (outcome.ok) {
      settlement.delivered.push(envelope);
      if (groupMode && envelope.groupKey !== null && envelope.status === Status.retry)
        unblocked.add(envelope.groupKey);
      return;
    }
    if (outcome.error === SKIPPED) {
      // A relay skipped it without reporting an earlier failure of the group: leave it as it is.
      settlement.skipped.push(envelope);
      if (key !== null) failedKeys.add(key);
      return;
    }
    if (key !== null) failedKeys.add(key);
    const failures = envelope.attempts + 1;
    const permanent = isPermanent(outcome.error);
    const strict = outbox.maxAttempts === Infinity;
    const failingFor = now - (envelope.failingSince?.getTime() ?? now);
    const dead =
      failures >= outbox.maxAttempts || (permanent && !strict) || failingFor >= outbox.maxRetryDuration;
    const delay =
      retryAfterOf(outcome.error, Math.min(outbox.backoff.min, 1000)) ??
      (permanent ? outbox.backoff.max : backoffDelay(failures, outbox.backoff, random));
    settlement.failed.push({
      id: envelope.id,
      error: describeError(outcome.error, maxErrorLength),
      dead,
      delay,
      envelope,
      cause: outcome.error,
    });
    if (groupMode && envelope.groupKey !== null) {
      if (dead && !park) unblocked.add(envelope.groupKey);
      else if (envelope.status !== Status.retry) settlement.newlyBlocked.push(envelope);
    }
  });
  settlement.unblockedGroups.push(...unblocked);
  return settlement;
}

function isPermanent(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { permanent?: unknown }).permanent === true;
}

/** A day: a destination asking for more is probably wrong, and the message would look lost. */
const MAX_RETRY_AFTER = 86_400_000;

/** The delay a destination asked for, kept between a floor (no tight loop on `0`) and a day. */
function retryAfterOf(error: unknown, floor: number): number | undefined {
  const value =
    typeof error === 'object' && error !== null ? (error as { retryAfter?: unknown }).retryAfter : undefined;
  if (typeof value !== 'number' || !Number.isFinite(value)) return undefined;
  return Math.round(Math.min(MAX_RETRY_AFTER, Math.max(floor, value)));
}
