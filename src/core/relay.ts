/** How the messages of an outbox are ordered. See docs/ordering.md. */
export type Ordering = 'group' | 'total' | 'none';

/** Message headers: string keys, string values. */
export type Headers = Record<string, string>;

/** A message as stored in the outbox and handed to a relay. */
export interface Envelope<P = unknown> {
  /** Increases with every insert; unique per table. Safe as a number up to 2^53. */
  readonly id: number;
  readonly outbox: string;
  /** The message type given by {@link defineMessage}, or `null`. */
  readonly type: string | null;
  /** The group key; `null` means unordered. */
  readonly groupKey: string | null;
  readonly partition: number;
  readonly payload: P;
  readonly headers: Headers;
  /** Failed attempts so far (0 on the first delivery). */
  readonly attempts: number;
  readonly lastError: string | null;
  /** When the next attempt is due, or `null` when it is due now. */
  readonly nextAttemptAt: Date | null;
  /** When its current run of failures began (its first failure since it was published or revived), or `null`. */
  readonly failingSince: Date | null;
  readonly insertedAt: Date;
}

/** What a relay learns about the batch it delivers. */
export interface DeliveryContext {
  readonly outbox: string;
  readonly partition: number;
  readonly ordering: Ordering;
  /**
   * Fires when the batch must be abandoned (shutdown timeout, lost partition). A relay should stop
   * sending; whatever it reports after that is not acknowledged.
   */
  readonly signal: AbortSignal;
}

/** The result for one message of a batch. */
export type DeliveryOutcome = { readonly ok: true } | { readonly ok: false; readonly error: unknown };

/**
 * A destination. `deliver` receives a batch in id order and returns:
 * - nothing (or `undefined`): every message was delivered;
 * - an array with one {@link DeliveryOutcome} per message, in batch order;
 * - or throws: no message of the batch was delivered.
 *
 * Order rule: within a group (see {@link orderingKey}), once a message failed the relay must not
 * send the later ones of that group in the same batch. outboxer never acknowledges a message behind
 * a failure of its group, so breaking the rule produces out-of-order deliveries at the destination.
 */
export interface Relay {
  /** Shown in logs and telemetry. */
  readonly name?: string;
  /** Connect to the destination. Called once by `start()` (or by `drain()` in manual testing mode). */
  start?(): Promise<void>;
  deliver(batch: readonly Envelope[], context: DeliveryContext): Promise<readonly DeliveryOutcome[] | void>;
  /** Disconnect. Called once by `stop()`. */
  stop?(): Promise<void>;
}

/**
 * The key whose messages must stay in sequence, under an ordering mode: the group key in `'group'`
 * mode (`null` = independent), one shared key in `'total'` mode, nothing in `'none'` mode.
 */
export function orderingKey(envelope: Envelope, ordering: Ordering): string | null {
  if (ordering === 'total') return '';
  if (ordering === 'none') return null;
  return envelope.groupKey;
}

/**
 * Delivers a batch one message at a time, in id order, skipping the rest of a group after one of
 * its messages failed. Unordered messages and other groups go on. The base of relays that can only
 * send one message at a time.
 */
export async function deliverEach(
  batch: readonly Envelope[],
  context: DeliveryContext,
  send: (envelope: Envelope) => Promise<unknown>,
): Promise<DeliveryOutcome[]> {
  const outcomes: DeliveryOutcome[] = [];
  const failedKeys = new Set<string>();
  for (const envelope of batch) {
    const key = orderingKey(envelope, context.ordering);
    if (context.signal.aborted) {
      // Not sent: no attempt is counted against it.
      outcomes.push({ ok: false, error: SKIPPED });
      continue;
    }
    if (key !== null && failedKeys.has(key)) {
      outcomes.push({ ok: false, error: SKIPPED });
      continue;
    }
    try {
      await send(envelope);
      outcomes.push({ ok: true });
    } catch (error) {
      if (key !== null) failedKeys.add(key);
      outcomes.push({ ok: false, error });
    }
  }
  return outcomes;
}

/**
 * Marks a message that was not attempted because an earlier message of its group failed. The
 * engine leaves such messages untouched (no attempt is counted).
 */
export const SKIPPED: unique symbol = Symbol.for('outboxer.skipped');

/**
 * A relay that calls `send` for each message, one at a time, in order.
 *
 * @example
 * functionRelay(async (message) => { await fetch(url, { method: 'POST', body: JSON.stringify(message.payload) }) })
 */
export function functionRelay(
  send: (envelope: Envelope, context: DeliveryContext) => Promise<unknown> | unknown,
  options: { name?: string } = {},
): Relay {
  return {
    name: options.name ?? 'function',
    deliver: (batch, context) => deliverEach(batch, context, async (envelope) => send(envelope, context)),
  };
}

/**
 * A relay that receives the whole batch and says per message whether it was delivered (or throws
 * when nothing was).
 *
 * @example
 * batchRelay(async (batch) => { const results = await api.sendMany(batch); return results.map((r) => r.ok ? { ok: true } : { ok: false, error: r.error }) })
 */
export function batchRelay(
  deliver: (
    batch: readonly Envelope[],
    context: DeliveryContext,
  ) => Promise<readonly DeliveryOutcome[] | void>,
  options: { name?: string } = {},
): Relay {
  return { name: options.name ?? 'batch', deliver };
}
