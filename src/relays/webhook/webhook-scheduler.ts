import {
  orderingKey,
  SKIPPED,
  type DeliveryContext,
  type DeliveryOutcome,
  type Envelope,
} from '../../core/relay.js';

const SKIP: DeliveryOutcome = Object.freeze({ ok: false, error: SKIPPED });

/**
 * Sends a batch with up to `concurrency` messages in flight, keeping the order rule:
 *
 * - a message starts only when no earlier message of its ordering key is waiting or in flight,
 *   so one key never has two requests in flight and its messages start in id order, each after
 *   the previous one succeeded;
 * - once a message of a key failed, the later ones of that key are not sent ({@link SKIPPED});
 * - among the messages that may start, the lowest id goes first: with `concurrency` 1 this is
 *   exactly id order, like `deliverEach`;
 * - unordered messages (key `null`) are independent of everything.
 *
 * When `context.signal` fires, nothing more starts; the messages not yet sent are reported as
 * {@link SKIPPED} (not attempted: no attempt is counted against them), and requests in flight end
 * through their own signal.
 */
export function deliverConcurrently(
  batch: readonly Envelope[],
  context: DeliveryContext,
  concurrency: number,
  send: (envelope: Envelope) => Promise<void>,
): Promise<DeliveryOutcome[]> {
  const keys = batch.map((envelope) => orderingKey(envelope, context.ordering));
  const outcomes = new Array<DeliveryOutcome | undefined>(batch.length);
  const waiting = batch.map((_, index) => index);
  const busy = new Set<string>();
  const failed = new Set<string>();
  let inFlight = 0;

  // The lowest waiting index whose key is free; marks the messages of failed keys on the way.
  const takeNext = (): number | undefined => {
    for (let i = 0; i < waiting.length; i += 1) {
      const index = waiting[i]!;
      const key = keys[index]!;
      if (key !== null && failed.has(key)) {
        outcomes[index] = SKIP;
        waiting.splice(i, 1);
        i -= 1;
        continue;
      }
      if (key !== null && busy.has(key)) continue;
      waiting.splice(i, 1);
      return index;
    }
    return undefined;
  };

  return new Promise((resolve) => {
    const pump = (): void => {
      while (inFlight < concurrency && !context.signal.aborted) {
        const index = takeNext();
        if (index === undefined) break;
        start(index);
      }
      if (inFlight > 0) return;
      // Nothing in flight and nothing could start: the batch is done (or was abandoned).
      for (const index of waiting) outcomes[index] = SKIP;
      waiting.length = 0;
      resolve(outcomes.map((outcome) => outcome ?? SKIP));
    };
    const start = (index: number): void => {
      const key = keys[index]!;
      inFlight += 1;
      if (key !== null) busy.add(key);
      send(batch[index]!)
        .then(
          () => {
            outcomes[index] = { ok: true };
          },
          (error: unknown) => {
            outcomes[index] = { ok: false, error };
            if (key !== null) failed.add(key);
          },
        )
        .finally(() => {
          inFlight -= 1;
          if (key !== null) busy.delete(key);
          pump();
        });
    };
    pump();
  });
}
