/**
 * Delivery of one claimed batch in rounds. SQS enqueues the entries of a call independently: when a
 * middle entry of a group fails, the later entries of that group still land (seen on ElasticMQ and
 * fauxqs), which would put them ahead of the failed one. So a call never carries two messages of
 * one ordering key: the batch goes out in waves of one message per key (`deliverInWaves`, here
 * called rounds), and a key whose message failed (or was refused before sending) stops there, its
 * later messages SKIPPED. A round is cut into SendMessageBatch calls of at most 10 entries and 1 MiB.
 */
import type { DeliveryContext, DeliveryOutcome, Envelope } from '../../core/relay.js';
import { deliverInWaves } from '../shared/waves.js';
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

/**
 * Delivers `batch` round after round; one outcome per message, in batch order. Messages not sent
 * because `context.signal` fired fail with its reason.
 */
export function deliverInRounds(
  batch: readonly Envelope[],
  context: DeliveryContext,
  deps: RoundsDeps,
): Promise<DeliveryOutcome[]> {
  return deliverInWaves(batch, context, (round) => sendRound(round, context, deps), {
    perKey: 1,
    abandoned: 'failed',
  });
}

/** One round: the entries SQS can take, in calls of at most 10 entries and 1 MiB, `concurrency` at once. */
async function sendRound(
  round: readonly Envelope[],
  context: DeliveryContext,
  deps: RoundsDeps,
): Promise<DeliveryOutcome[]> {
  const outcomes = new Array<DeliveryOutcome>(round.length);
  const sendable: Array<{ index: number; prepared: PreparedEntry }> = [];
  round.forEach((envelope, index) => {
    const prepared = deps.prepare(envelope);
    if (prepared instanceof Error) outcomes[index] = { ok: false, error: prepared };
    else sendable.push({ index, prepared });
  });
  await forEachLimited(planCalls(sendable), deps.concurrency, (call) =>
    sendCall(call, round, outcomes, context, deps),
  );
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
