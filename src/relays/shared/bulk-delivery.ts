/**
 * One batch, one call (BullMQ's `addBulk`; the pg-boss relay's `insert` uses this module too);
 * the jobs one by one only to single out the job the destination refused.
 *
 * Why not just throw when the call fails: a job refused for good (larger than the queue's
 * `sizeLimit`, data Postgres' jsonb will not take) would fail every batch it is in, and so hold up
 * every group behind it. Sending the jobs one by one after such a failure pins the refusal on
 * that job (and the rest of its group), and the other groups go on. A connection failure says
 * nothing about single jobs: the whole batch is retried then.
 *
 * Shared by the relays that send a batch in one call.
 */
import {
  orderingKey,
  SKIPPED,
  type DeliveryContext,
  type DeliveryOutcome,
  type Envelope,
} from '../../core/relay.js';

/** What {@link deliverInBulk} needs from a destination. */
export interface BulkSender<J> {
  /** The job of one message; a throw fails that message (and holds back the rest of its group). */
  build(envelope: Envelope): J;
  /** Sends jobs in one call: all of them or, when it throws, possibly only some (see the caller). */
  send(jobs: J[], signal: AbortSignal): Promise<void>;
  /** True when the failure is not about particular jobs (connection, timeout, credentials). */
  failsWholeBatch(error: unknown): boolean;
  /** The error recorded per message; `single` is the job when the failed call held it alone. */
  errorOf(error: unknown, single: J | undefined): unknown;
}

interface Entry<J> {
  readonly index: number;
  readonly key: string | null;
  readonly job: J;
}

const DELIVERED: DeliveryOutcome = Object.freeze({ ok: true });
const SKIP: DeliveryOutcome = Object.freeze({ ok: false, error: SKIPPED });

/**
 * Delivers a batch in one call and returns one outcome per message. After a failure that is
 * about particular jobs, sends them again one at a time, in order, skipping the rest of a group
 * once one of its jobs failed. Redelivering what the failed call may already have added is
 * harmless as long as the destination ignores a job id it already holds.
 */
export async function deliverInBulk<J>(
  batch: readonly Envelope[],
  context: DeliveryContext,
  sender: BulkSender<J>,
): Promise<DeliveryOutcome[]> {
  const outcomes = new Array<DeliveryOutcome>(batch.length).fill(SKIP);
  const failedKeys = new Set<string>();
  const entries: Entry<J>[] = [];
  batch.forEach((envelope, index) => {
    const key = orderingKey(envelope, context.ordering);
    if (key !== null && failedKeys.has(key)) return;
    try {
      entries.push({ index, key, job: sender.build(envelope) });
    } catch (error) {
      outcomes[index] = { ok: false, error };
      if (key !== null) failedKeys.add(key);
    }
  });
  if (entries.length === 0) return outcomes;
  try {
    await sender.send(
      entries.map((entry) => entry.job),
      context.signal,
    );
    for (const entry of entries) outcomes[entry.index] = DELIVERED;
  } catch (error) {
    if (entries.length === 1 || sender.failsWholeBatch(error) || context.signal.aborted) {
      failAll(entries, outcomes, sender.errorOf(error, entries.length === 1 ? entries[0]!.job : undefined));
    } else {
      await sendOneByOne(entries, outcomes, failedKeys, context.signal, sender);
    }
  }
  return outcomes;
}

async function sendOneByOne<J>(
  entries: readonly Entry<J>[],
  outcomes: DeliveryOutcome[],
  failedKeys: Set<string>,
  signal: AbortSignal,
  sender: BulkSender<J>,
): Promise<void> {
  for (const [position, entry] of entries.entries()) {
    if (entry.key !== null && failedKeys.has(entry.key)) continue; // stays SKIPPED
    if (signal.aborted) {
      failAll(entries.slice(position), outcomes, sender.errorOf(signal.reason, undefined));
      return;
    }
    try {
      await sender.send([entry.job], signal);
      outcomes[entry.index] = DELIVERED;
    } catch (error) {
      if (sender.failsWholeBatch(error)) {
        // The connection went away meanwhile: the rest would fail the same way.
        failAll(entries.slice(position), outcomes, sender.errorOf(error, undefined));
        return;
      }
      outcomes[entry.index] = { ok: false, error: sender.errorOf(error, entry.job) };
      if (entry.key !== null) failedKeys.add(entry.key);
    }
  }
}

function failAll<J>(entries: readonly Entry<J>[], outcomes: DeliveryOutcome[], error: unknown): void {
  for (const entry of entries) outcomes[entry.index] = { ok: false, error };
}
