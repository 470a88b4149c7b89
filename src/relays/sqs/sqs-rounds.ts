/**
 * Delivery of one claimed batch in rounds. SQS enqueues the entries of a call independently: when a
 * middle entry of a group fails, the later entries of that group still land (seen on ElasticMQ and
 * fauxqs), which would put them ahead of the failed one. So a call never carries two messages of
 * one ordering key: round n sends the n-th message of every key, and a key whose message failed
 * (or was refused before sending) stops there, its later messages SKIPPED.
 */
import {
  orderingKey,
  SKIPPED,
  type DeliveryContext,
  type DeliveryOutcome,
  type Envelope,
} from '../../core/relay.js';
import { readBatchResult, type SqsBatchEntry } from './sqs-client.js';
import { callFailure, entryFailure } from './sqs-errors.js';
import { SQS_LIMITS, type PreparedEntry } from './sqs-message.js';

/** What a delivery in rounds needs from the relay. */
export interface RoundsDeps {
  readonly queueUrl: string;
  readonly concurrency: number;
  prepare(envelope: Envelope): PreparedEntry | Error;
  sendBatch(entries: SqsBatchEntry[]): Promise<unknown>;
}

/**
 * Batch positions per round: a key's k-th message (in id order) goes to round k; messages without
 * a key are independent and all go to the first round.
 *
 * @example
 * planRounds(['a', 'a', null, 'b', 'a']) // [[0, 2, 3], [1], [4]]
 */
export function planRounds(keys: ReadonlyArray<string | null>): number[][] {
  const rounds: number[][] = [];
  const seen = new Map<string, number>();
  keys.forEach((key, index) => {
    let round = 0;
    if (key !== null) {
      round = seen.get(key) ?? 0;
      seen.set(key, round + 1);
    }
    (rounds[round] ??= []).push(index);
  });
  return rounds;
}

/** Cuts prepared entries (in order) into calls of at most 10 entries and 1 MiB. */
export function planCalls<T extends { readonly prepared: PreparedEntry }>(items: readonly T[]): T[][] {
  const calls: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const full =
      current.length === SQS_LIMITS.entriesPerCall || bytes + item.prepared.bytes > SQS_LIMITS.callBytes;
    if (current.length > 0 && full) {
      calls.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += item.prepared.bytes;
  }
  if (current.length > 0) calls.push(current);
  return calls;
}

/** Delivers `batch` round after round; one outcome per message, in batch order. */
export async function deliverInRounds(
  batch: readonly Envelope[],
  context: DeliveryContext,
  deps: RoundsDeps,
): Promise<DeliveryOutcome[]> {
  const outcomes: DeliveryOutcome[] = new Array(batch.length);
  const keys = batch.map((envelope) => orderingKey(envelope, context.ordering));
  const failedKeys = new Set<string>();
  for (const round of planRounds(keys)) {
    const sendable: Array<{ index: number; prepared: PreparedEntry }> = [];
    for (const index of round) {
      const key = keys[index]!;
      if (context.signal.aborted) outcomes[index] = { ok: false, error: context.signal.reason };
      else if (key !== null && failedKeys.has(key)) outcomes[index] = { ok: false, error: SKIPPED };
      else {
        const prepared = deps.prepare(batch[index]!);
        if (prepared instanceof Error) outcomes[index] = { ok: false, error: prepared };
        else sendable.push({ index, prepared });
      }
    }
    await forEachLimited(planCalls(sendable), deps.concurrency, (call) =>
      sendCall(call, batch, outcomes, context, deps),
    );
    // A round holds one message per key, so marking failed keys after it is enough.
    for (const index of round) {
      const key = keys[index]!;
      if (key !== null && outcomes[index]?.ok === false) failedKeys.add(key);
    }
  }
  return outcomes;
}

async function sendCall(
  call: ReadonlyArray<{ index: number; prepared: PreparedEntry }>,
  batch: readonly Envelope[],
  outcomes: DeliveryOutcome[],
  context: DeliveryContext,
  deps: RoundsDeps,
): Promise<void> {
  if (context.signal.aborted) {
    for (const { index } of call) outcomes[index] = { ok: false, error: context.signal.reason };
    return;
  }
  let output: unknown;
  try {
    output = await deps.sendBatch(call.map((item) => item.prepared.entry));
  } catch (error) {
    const failure = callFailure(error, deps.queueUrl, call.length, context.signal);
    for (const { index } of call) outcomes[index] = { ok: false, error: failure };
    return;
  }
  const result = readBatchResult(output);
  for (const { index, prepared } of call) {
    const id = prepared.entry.Id;
    const failed = result.failed.get(id);
    if (failed !== undefined) outcomes[index] = { ok: false, error: entryFailure(failed, batch[index]!.id) };
    else if (result.successful.has(id)) outcomes[index] = { ok: true };
    else
      outcomes[index] = {
        ok: false,
        error: new Error(
          `SQS reported no result for message ${batch[index]!.id} (entry ${id}); it will be sent again.`,
        ),
      };
  }
}

/** Runs `task` for every item with at most `limit` running at once. */
async function forEachLimited<T>(
  items: readonly T[],
  limit: number,
  task: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await task(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
