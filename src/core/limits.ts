/**
 * The bounds of every input whose size the caller chooses. Each keeps one call's memory, event-loop
 * time and statement size within what a single round trip should cost; past a bound the call is
 * refused with a typed error before anything is sent, so nothing is half-written.
 * docs/reliability.md ("Bad input") and docs/errors.md list them.
 */
import { OutboxerError } from './errors.js';
import { integerOption, invalidOption } from './options.js';

/** Messages in one `publishMany` call: one statement per table, so one call is one round trip. */
export const MAX_PUBLISH_BATCH = 10_000;
/** Encoded payloads and headers of one `publishMany` call, together (64 MiB). */
export const MAX_PUBLISH_BATCH_BYTES = 64 * 1024 * 1024;
/** Rows one `listPending`, `listDead` or `blockedGroups` call returns. */
export const MAX_LIST_LIMIT = 10_000;
/** Ids one `retryDead` or `discard` call takes. */
export const MAX_IDS = 10_000;

/** Refuses a `publishMany` call over {@link MAX_PUBLISH_BATCH} messages, before encoding any. */
export function checkBatchLength(count: number): void {
  if (count > MAX_PUBLISH_BATCH) {
    throw new OutboxerError(
      'BATCH_TOO_LARGE',
      `publishMany was given ${count} messages, over the limit of ${MAX_PUBLISH_BATCH} a call. Split them into several calls inside the same transaction.`,
    );
  }
}

/** Refuses a batch whose encoded messages total over {@link MAX_PUBLISH_BATCH_BYTES}. */
export function checkBatchBytes(bytes: number): void {
  if (bytes > MAX_PUBLISH_BATCH_BYTES) {
    throw new OutboxerError(
      'BATCH_TOO_LARGE',
      `publishMany's messages total over ${MAX_PUBLISH_BATCH_BYTES} bytes encoded (64 MiB a call). Split them into several calls inside the same transaction.`,
    );
  }
}

/** A listing's `limit`: an integer from 1 to {@link MAX_LIST_LIMIT}, 100 when absent. */
export function listLimit(limit: unknown): number {
  return integerOption('limit', limit, 100, 1, MAX_LIST_LIMIT);
}

/** Message ids for `retryDead` and `discard`: positive safe integers, at most {@link MAX_IDS}. */
export function checkIds(ids: unknown): number[] {
  if (!Array.isArray(ids) || !everyIndex(ids, (id) => Number.isSafeInteger(id) && (id as number) > 0)) {
    throw invalidOption('ids', 'an array of message ids (positive integers)', ids);
  }
  if (ids.length > MAX_IDS) {
    throw invalidOption('ids', `at most ${MAX_IDS} ids a call (call again for the rest)`, ids);
  }
  return [...(ids as number[])];
}

/** Like `every`, but a hole of a sparse array counts as `undefined` instead of being skipped. */
function everyIndex(values: readonly unknown[], test: (value: unknown) => boolean): boolean {
  for (let i = 0; i < values.length; i += 1) if (!test(values[i])) return false;
  return true;
}
