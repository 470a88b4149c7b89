import { integerOption, invalidOption, rejectUnknownKeys } from '../../core/options.js';
import type { Envelope } from '../../core/relay.js';
import type { AmqpConnectionLike } from './rabbitmq-channel.js';

/** Options of {@link rabbitmqRelay}. */
export interface RabbitMqRelayOptions {
  /**
   * Where the relay opens its confirm channel. Either:
   * - a connection you own: `await amqp.connect(url, { recovery: true })` (amqplib ≥ 1.1 reconnects
   *   it by itself) or a plain `await amqp.connect(url)`. The relay never closes it. A plain
   *   connection that dropped cannot be reopened by the relay: every batch then fails until you
   *   replace it, so prefer a recovering one or the function form;
   * - a function that connects, e.g. `() => amqp.connect(url)`: the relay connects in `start()`,
   *   connects again on the next batch after the connection dropped, and closes it in `stop()`.
   */
  connection: AmqpConnectionLike | (() => Promise<AmqpConnectionLike>);
  /**
   * The exchange messages are published to. `''` is the default exchange, which routes to the
   * queue named by the routing key.
   */
  exchange: string;
  /**
   * Routing key of a message: a fixed string or a function of the envelope. Default: the group
   * key, or `''` for a message without one (a consistent-hash exchange then spreads groups over
   * queues while each group stays in one queue). At most 255 bytes.
   */
  routingKey?: string | ((envelope: Envelope) => string);
  /**
   * Publish with `mandatory`, so that a message no queue is bound for comes back and fails
   * (retryably) instead of being dropped silently by the broker. Default true.
   */
  mandatory?: boolean;
  /**
   * Default true: at most one unconfirmed message per group (per ordering key) at a time, so a
   * message the broker nacks or returns can never be overtaken by a later one of its group. Groups
   * still travel together: a batch takes as many confirm round trips as its largest group has
   * messages. False publishes the whole batch at once (one round trip): faster when a batch is
   * mostly one group (or in `'total'` ordering), but after a nack the later messages of that group
   * may already sit in the queue ahead of the retried one. See docs/relays/rabbitmq.md.
   */
  strictOrder?: boolean;
  /**
   * Milliseconds to wait for a connection and channel, and for the broker's confirms of one wave.
   * Unconfirmed messages then fail (retryably) and the channel is replaced. Default 30000.
   */
  timeout?: number;
  /** Check in `start()` that the exchange exists (RELAY_MISCONFIGURED if not). Default true. */
  checkExchange?: boolean;
  /**
   * The `message_id` of a message, what consumers deduplicate on. Default: the outbox id,
   * `String(envelope.id)`. Outbox ids are unique per outbox table only: when several tables
   * publish to the same consumers, make it unique across them, e.g. `(m) => m.outbox + '-' + m.id`.
   */
  messageId?: (envelope: Envelope) => string;
  /** Shown in logs and telemetry. Default `'rabbitmq'`. */
  name?: string;
}

export interface ResolvedRabbitMqOptions {
  readonly connection: AmqpConnectionLike | (() => Promise<AmqpConnectionLike>);
  readonly exchange: string;
  readonly routingKey: (envelope: Envelope) => string;
  readonly mandatory: boolean;
  readonly strictOrder: boolean;
  readonly timeout: number;
  readonly checkExchange: boolean;
  readonly messageId: (envelope: Envelope) => string;
  readonly name: string;
}

/** Longest AMQP short string (exchange names, routing keys), in bytes. */
export const AMQP_SHORT_STRING_BYTES = 255;

const KEYS = [
  'connection',
  'exchange',
  'routingKey',
  'mandatory',
  'strictOrder',
  'timeout',
  'checkExchange',
  'messageId',
  'name',
] as const;

/** The default routing key: the group key, or `''`. */
export function defaultRoutingKey(envelope: Envelope): string {
  return envelope.groupKey ?? '';
}

/** Validates the options once, in the factory. */
export function resolveRabbitMqOptions(raw: unknown): ResolvedRabbitMqOptions {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw invalidOption('rabbitmqRelay(options)', 'an object { connection, exchange, ... }', raw);
  }
  const options = raw as Record<string, unknown>;
  rejectUnknownKeys('rabbitmqRelay', options, KEYS);
  return Object.freeze({
    connection: checkConnection(options.connection),
    exchange: shortString('exchange', options.exchange, undefined),
    routingKey: resolveRoutingKey(options.routingKey),
    mandatory: booleanOption('mandatory', options.mandatory, true),
    strictOrder: booleanOption('strictOrder', options.strictOrder, true),
    timeout: integerOption('rabbitmqRelay.timeout', options.timeout, 30_000, 1, 2 ** 31 - 1),
    checkExchange: booleanOption('checkExchange', options.checkExchange, true),
    messageId:
      functionOption<(envelope: Envelope) => string>('messageId', options.messageId) ?? defaultMessageId,
    name: nameOption(options.name),
  });
}

function checkConnection(value: unknown): ResolvedRabbitMqOptions['connection'] {
  if (typeof value === 'function') return value as () => Promise<AmqpConnectionLike>;
  const candidate = value as Partial<AmqpConnectionLike> | null;
  if (
    typeof candidate === 'object' &&
    candidate !== null &&
    typeof candidate.createConfirmChannel === 'function'
  ) {
    return candidate as AmqpConnectionLike;
  }
  throw invalidOption(
    'rabbitmqRelay.connection',
    'an amqplib connection (await amqp.connect(url, { recovery: true })) or a function that connects (() => amqp.connect(url))',
    value,
  );
}

function shortString(option: string, value: unknown, fallback: string | undefined): string {
  if (value === undefined && fallback !== undefined) return fallback;
  if (typeof value !== 'string' || Buffer.byteLength(value, 'utf8') > AMQP_SHORT_STRING_BYTES) {
    throw invalidOption(
      `rabbitmqRelay.${option}`,
      `a string of at most ${AMQP_SHORT_STRING_BYTES} bytes ('' is the default exchange)`,
      value,
    );
  }
  return value;
}

function resolveRoutingKey(value: unknown): (envelope: Envelope) => string {
  if (value === undefined) return defaultRoutingKey;
  if (typeof value === 'function') return value as (envelope: Envelope) => string;
  if (typeof value === 'string' && Buffer.byteLength(value, 'utf8') <= AMQP_SHORT_STRING_BYTES)
    return () => value;
  throw invalidOption(
    'rabbitmqRelay.routingKey',
    `a string of at most ${AMQP_SHORT_STRING_BYTES} bytes or a function (envelope) => string`,
    value,
  );
}

function booleanOption(option: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw invalidOption(`rabbitmqRelay.${option}`, 'true or false', value);
  return value;
}

/** The default message id: the outbox id. */
export function defaultMessageId(envelope: Envelope): string {
  return String(envelope.id);
}

function functionOption<T>(option: string, value: unknown): T | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'function')
    throw invalidOption(`rabbitmqRelay.${option}`, 'a function (envelope) => string', value);
  return value as T;
}

function nameOption(value: unknown): string {
  if (value === undefined) return 'rabbitmq';
  if (typeof value !== 'string' || value.length === 0)
    throw invalidOption('rabbitmqRelay.name', 'a non-empty string', value);
  return value;
}
