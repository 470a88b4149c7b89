/**
 * What the engine hands a relay, built for relay tests: a full {@link Envelope} and a
 * {@link DeliveryContext}, so that a test names only the fields it is about.
 */
import type { DeliveryContext, DeliveryOutcome, Envelope, Relay } from 'outboxer';

let nextId = 1;

/**
 * A full envelope, as a first delivery attempt: by default the next id of this test file (from 1),
 * outbox `'events'`, no type, no group key, partition 0, payload `{ id }`, no headers, 0 attempts,
 * no error, due now, `failingSince: null`, inserted now. `overrides` replace any of these (a field
 * given as `undefined` keeps its default).
 *
 * @example
 * makeEnvelope({ groupKey: 'order-1', type: 'order.paid' })
 */
export function makeEnvelope(overrides: Partial<Envelope> = {}): Envelope {
  const given = Object.fromEntries(Object.entries(overrides).filter(([, value]) => value !== undefined));
  const id = overrides.id ?? nextId++;
  return {
    outbox: 'events',
    type: null,
    groupKey: null,
    partition: 0,
    payload: { id },
    headers: {},
    attempts: 0,
    lastError: null,
    nextAttemptAt: null,
    failingSince: null,
    insertedAt: new Date(),
    ...given,
    id,
  };
}

/**
 * A delivery context: outbox `'events'`, partition 0, `'group'` ordering and a signal that never
 * fires, unless given.
 *
 * @example
 * makeContext({ ordering: 'total', signal: controller.signal })
 */
export function makeContext(
  overrides: { ordering?: DeliveryContext['ordering']; signal?: AbortSignal | undefined } = {},
): DeliveryContext {
  return {
    outbox: 'events',
    partition: 0,
    ordering: overrides.ordering ?? 'group',
    signal: overrides.signal ?? new AbortController().signal,
  };
}

/**
 * Hands `batch` to `relay` as the engine would, and returns what it reported (the relays under test
 * report one outcome per message).
 *
 * @example
 * expect(await deliverBatch(relay, [makeEnvelope()])).toEqual([{ ok: true }]);
 */
export async function deliverBatch(
  relay: Relay,
  batch: readonly Envelope[],
  context: DeliveryContext = makeContext(),
): Promise<DeliveryOutcome[]> {
  return (await relay.deliver(batch, context)) as DeliveryOutcome[];
}
