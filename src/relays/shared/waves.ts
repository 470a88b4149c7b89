/**
 * Sending a batch in waves, so that a later message of a group can never reach the destination
 * ahead of an earlier one that the destination refused: wave n holds the n-th message of every
 * ordering key (see `orderingKey`), a key stops at its first failure, and its later messages are
 * {@link SKIPPED}, as with `deliverEach`, but with a whole wave in flight at once.
 *
 * Shared by the relays whose destination takes many messages at once but may refuse some of them
 * independently: RabbitMQ (a wave per confirm round), NATS JetStream (a wave of PubAcks), Redis
 * Streams (a wave per pipeline), SQS (a wave, there called a round, cut into SendMessageBatch
 * calls) and BullMQ (a wave per `addBulk` call).
 */
import { DeliveryError } from '../../core/errors.js';
import {
  orderingKey,
  SKIPPED,
  type DeliveryContext,
  type DeliveryOutcome,
  type Envelope,
} from '../../core/relay.js';

/**
 * Sends the messages of one wave; returns one outcome per message, in wave order. A throw fails
 * every message of the wave.
 */
export type SendWave = (wave: readonly Envelope[]) => Promise<readonly DeliveryOutcome[]>;

/** How {@link deliverInWaves} cuts a batch and reports what it did not send. */
export interface WaveOptions {
  /**
   * At most this many messages of one ordering key per wave. `1` (the default): a key never has two
   * messages in flight. `Infinity`: the whole batch in one wave.
   */
  readonly perKey?: number;
  /**
   * What the messages not sent because `context.signal` fired are reported as: `'skipped'` (the
   * default: {@link SKIPPED}, no attempt counted), or `'failed'` with the signal's reason.
   */
  readonly abandoned?: 'skipped' | 'failed';
}

const skipped: DeliveryOutcome = Object.freeze({ ok: false, error: SKIPPED });

/**
 * Delivers `batch` in waves of at most `perKey` messages per ordering key (all unordered messages
 * go in the first wave); returns one outcome per message, in batch order. The next message of a key
 * is sent only after the previous wave confirmed the earlier ones, so with `perKey = 1` a refused
 * message is never overtaken by a later message of its group. With `perKey = Infinity` the whole
 * batch goes out in one wave, and a message that follows a failure of its group is reported as
 * skipped even when the destination took it (it will be sent again, after the failed one).
 *
 * @example
 * deliverInWaves(batch, context, (wave) => publishAll(wave), { perKey: strictOrder ? 1 : Infinity })
 */
export async function deliverInWaves(
  batch: readonly Envelope[],
  context: DeliveryContext,
  sendWave: SendWave,
  options: WaveOptions = {},
): Promise<DeliveryOutcome[]> {
  const perKey = options.perKey ?? 1;
  const outcomes = new Array<DeliveryOutcome>(batch.length);
  const keys = batch.map((envelope) => orderingKey(envelope, context.ordering));
  const failedKeys = new Set<string>();
  let remaining = batch.map((_, index) => index);
  while (remaining.length > 0) {
    if (context.signal.aborted) {
      const error = options.abandoned === 'failed' ? context.signal.reason : SKIPPED;
      for (const index of remaining) outcomes[index] = { ok: false, error };
      break;
    }
    const { wave, later } = nextWave(keys, remaining, perKey, failedKeys, outcomes);
    if (wave.length === 0) break;
    const results = await sendSafely(
      sendWave,
      wave.map((index) => batch[index]!),
    );
    wave.forEach((index, position) => {
      const key = keys[index]!;
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

/** The next wave and what waits for a later one; marks the messages of failed keys skipped. */
function nextWave(
  keys: ReadonlyArray<string | null>,
  remaining: readonly number[],
  perKey: number,
  failedKeys: ReadonlySet<string>,
  outcomes: DeliveryOutcome[],
): { wave: number[]; later: number[] } {
  const wave: number[] = [];
  const later: number[] = [];
  const counts = new Map<string, number>();
  for (const index of remaining) {
    const key = keys[index]!;
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
