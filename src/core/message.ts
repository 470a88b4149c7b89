import type { Headers } from './relay.js';

const MESSAGE_BRAND = Symbol.for('outboxer.message');

/** A message made by a factory from {@link defineMessage}: it knows its outbox, type and group key. */
export interface Message<P = unknown, O extends string = string> {
  readonly [MESSAGE_BRAND]: true;
  readonly outbox: O;
  readonly type: string;
  readonly payload: P;
  readonly groupKey: string | null;
  readonly headers: Headers | undefined;
}

export interface MessageDefinition<P, O extends string> {
  /** The outbox the message goes to. */
  outbox: O;
  /** A type name stored with the message and passed to relays (e.g. as a Kafka header). */
  type: string;
  /** The group key of a payload; `null` or `undefined` makes the message unordered. */
  groupKey?: (payload: P) => string | null | undefined;
  /** Headers computed from the payload. */
  headers?: (payload: P) => Headers | undefined;
}

/** Calling it with a payload makes a {@link Message}; it also carries its definition. */
export interface MessageFactory<P, O extends string = string> {
  (payload: P): Message<P, O>;
  readonly outbox: O;
  readonly type: string;
}

/**
 * Defines a typed message, so `publish(tx, OrderPaid({ orderId: 42 }))` type-checks the payload
 * and the group key is computed in one place.
 *
 * @example
 * const OrderPaid = defineMessage<{ orderId: number }>({
 *   outbox: 'orders',
 *   type: 'OrderPaid',
 *   groupKey: (order) => `order:${order.orderId}`,
 * });
 * await outboxer.publish(tx, OrderPaid({ orderId: 42 }));
 */
export function defineMessage<P, O extends string = string>(
  definition: MessageDefinition<P, O>,
): MessageFactory<P, O> {
  const factory = (payload: P): Message<P, O> => ({
    [MESSAGE_BRAND]: true,
    outbox: definition.outbox,
    type: definition.type,
    payload,
    groupKey: definition.groupKey?.(payload) ?? null,
    headers: definition.headers?.(payload),
  });
  return Object.assign(factory, { outbox: definition.outbox, type: definition.type });
}

export function isMessage(value: unknown): value is Message {
  return (
    typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[MESSAGE_BRAND] === true
  );
}
