/**
 * Sending a batch in waves, so that a later message of a group can never reach the broker ahead
 * of an earlier one that the broker refused.
 *
 * This helper is the same in the rabbitmq, nats and redis-streams relays (rabbitmq-waves.ts,
 * nats-waves.ts, redis-streams-waves.ts); it belongs next to `deliverEach` in the core and is kept
 * here until it moves there.
 */
import { DeliveryError } from '../../core/errors.js';
import {
  orderingKey,
  SKIPPED,
  type DeliveryContext,
  type DeliveryOutcome,
  type Envelope,
} from '../../core/relay.js';

/** Sends the messages of one wave together; returns one outcome per message, in wave order. */
export type SendWave = (wave: readonly Envelope[]) => Promise<readonly DeliveryOutcome[]>;

const skipped: DeliveryOutcome = { ok: false, error: SKIPPED };

/**
 * Delivers `batch` in waves of at most `perKey` messages per ordering key (all unordered messages
 * go in the first wave). The next message of a key is sent only after the previous wave confirmed
 * the earlier ones, so with `perKey = 1` a refused message is never overtaken by a later message
 * of its group. With `perKey = Infinity` the whole batch goes out in one wave, and a message that
 * follows a failure of its group is reported as skipped even when the broker took it (it will be
 * sent again, after the failed one).
 *
 * A wave that throws counts as failed for all its messages. When `context.signal` fires, the
 * messages not sent yet are reported skipped (like `deliverEach` does).
 */
export async function deliverInWaves(
  batch: readonly Envelope[],
  context: DeliveryContext,
  perKey: number,
  sendWave: SendWave,
): Promise<DeliveryOutcome[]> {
  const outcomes = new Array<DeliveryOutcome>(batch.length);
  const failedKeys = new Set<string>();
  let remaining = batch.map((_, index) => index);
  while (remaining.length > 0) {
    if (context.signal.aborted) {
      for (const index of remaining) outcomes[index] = skipped; // not sent: no attempt counted
      break;
    }
    const { wave, later } = nextWave(batch, remaining, context, perKey, failedKeys, outcomes);
    if (wave.length === 0) break;
    const results = await sendSafely(
      sendWave,
      wave.map((index) => batch[index]!),
    );
    wave.forEach((index, position) => {
      const key = orderingKey(batch[index]!, context.ordering);
      if (key !== null && failedKeys.has(key)) {
        outcomes[index] = skipped; // an earlier message of the group failed in this very wave
        return;
      }
      const outcome = results[position]!;
      outcomes[index] = outcome;
      if (!outcome.ok && key !== null) failedKeys.add(key);
    });
    remaining = later;
  }
  return Array.from(outcomes, (outcome) => outcome ?? skipped);
}

function nextWave(
  batch: readonly Envelope[],
  remaining: readonly number[],
  context: DeliveryContext,
  perKey: number,
  failedKeys: ReadonlySet<string>,
  outcomes: DeliveryOutcome[],
): { wave: number[]; later: number[] } {
  const wave: number[] = [];
  const later: number[] = [];
  const counts = new Map<string, number>();
  for (const index of remaining) {
    const key = orderingKey(batch[index]!, context.ordering);
    if (key === null) {
      wave.push(index);
      continue;
    }
    if (failedKeys.has(key)) {
      outcomes[index] = skipped;
      continue;
    }
    const count = counts.get(key) ?? 0;
    if (count >= perKey) {
      later.push(index);
      continue;
    }
    counts.set(key, count + 1);
    wave.push(index);
  }
  return { wave, later };
}

async function sendSafely(
  sendWave: SendWave,
  wave: readonly Envelope[],
): Promise<readonly DeliveryOutcome[]> {
  try {
    const results = await sendWave(wave);
    if (results.length === wave.length) return results;
    const error = new DeliveryError(
      `internal error: ${results.length} outcomes for a wave of ${wave.length}`,
    );
    return wave.map(() => ({ ok: false, error }));
  } catch (error) {
    return wave.map(() => ({ ok: false, error }));
  }
}

/** A wait that took longer than allowed: retryable. */
export class WaitTimeout extends DeliveryError {
  constructor(what: string, ms: number) {
    super(`${what} took longer than ${ms} ms`);
    this.name = 'WaitTimeout';
  }
}

/**
 * Waits for `promise`, but no longer than `ms` milliseconds and not past `signal`: rejects with a
 * {@link WaitTimeout} naming `what` on timeout, with the signal's reason on abort.
 */
export function within<T>(
  promise: Promise<T>,
  ms: number,
  signal: AbortSignal | undefined,
  what: string,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const finish = (settle: () => void): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      settle();
    };
    const onAbort = (): void => finish(() => reject(signal!.reason));
    const timer = setTimeout(() => finish(() => reject(new WaitTimeout(what, ms))), ms);
    signal?.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => finish(() => resolve(value)),
      (error: unknown) => finish(() => reject(error)),
    );
  });
}
