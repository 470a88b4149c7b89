import { integerOption, invalidOption, rejectUnknownKeys } from '../../core/options.js';
import type { Envelope } from '../../core/relay.js';
import type { JetStreamClientLike, NatsHeadersLike } from './nats-client.js';

/** Options of {@link natsRelay}; `H` is the NATS client's header type (`MsgHdrs`), inferred. */
export interface NatsRelayOptions<H extends NatsHeadersLike = NatsHeadersLike> {
  /**
   * Your JetStream client, `jetstream(nc)` from `@nats-io/jetstream`. The relay never closes the
   * connection. Connect with `maxReconnectAttempts: -1` so that the client keeps reconnecting
   * through an outage of any length (its default gives up after 10 attempts, and a closed
   * connection cannot be reopened by the relay).
   */
  jetstream: JetStreamClientLike<NoInfer<H>>;
  /**
   * The `headers` function of the NATS client (`import { headers } from '@nats-io/transport-node'`).
   * outboxer imports nothing from the NATS packages, so it needs this to build message headers.
   */
  createHeaders: () => H;
  /**
   * The subject of a message: a fixed subject or a function of the envelope, e.g.
   * `(m) => 'orders.' + m.type`. A stream must capture it. No wildcards (`*`, `>`), no spaces.
   */
  subject: string | ((envelope: Envelope) => string);
  /**
   * Default true: at most one message per group (per ordering key) waits for its PubAck at a time,
   * so a message JetStream refuses is never overtaken by a later one of its group. Different
   * groups are published together. False publishes the whole batch at once. See
   * docs/relays/nats.md.
   */
  strictOrder?: boolean;
  /** Milliseconds to wait for the PubAck of a message. Default 5000. */
  timeout?: number;
  /**
   * Check in `start()` that a stream captures `subject` (when it is a string): RELAY_MISCONFIGURED
   * if none does or JetStream is not enabled. Default true.
   */
  checkStream?: boolean;
  /**
   * The `Nats-Msg-Id` of a message, on which the stream drops repeats within its duplicate window.
   * Default: the outbox id, `String(envelope.id)`. Outbox ids are unique per outbox table only: when
   * several tables publish into one stream, make it unique across them, e.g.
   * `(m) => m.outbox + '-' + m.id`, or a message of one table is dropped as a repeat of the other's.
   */
  messageId?: (envelope: Envelope) => string;
  /** Shown in logs and telemetry. Default `'nats'`. */
  name?: string;
}

export interface ResolvedNatsOptions {
  readonly jetstream: JetStreamClientLike;
  readonly createHeaders: () => NatsHeadersLike;
  /** The fixed subject, or undefined when it is a function. */
  readonly fixedSubject: string | undefined;
  readonly subject: (envelope: Envelope) => string;
  readonly strictOrder: boolean;
  readonly timeout: number;
  readonly checkStream: boolean;
  readonly messageId: (envelope: Envelope) => string;
  readonly name: string;
}

const KEYS = [
  'jetstream',
  'createHeaders',
  'subject',
  'strictOrder',
  'timeout',
  'checkStream',
  'messageId',
  'name',
] as const;

/** Why `subject` cannot be published to, or undefined when it can. */
export function subjectProblem(subject: unknown): string | undefined {
  if (typeof subject !== 'string' || subject.length === 0) return 'it is not a non-empty string';
  if (/\s/.test(subject)) return 'it contains white space';
  const tokens = subject.split('.');
  if (tokens.some((token) => token.length === 0))
    return 'it has an empty token (a leading, trailing or double dot)';
  if (tokens.some((token) => token === '*' || token === '>'))
    return 'it has a wildcard (* or >), which only subscriptions may use';
  return undefined;
}

/** Validates the options once, in the factory. */
export function resolveNatsOptions(raw: unknown): ResolvedNatsOptions {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw invalidOption('natsRelay(options)', 'an object { jetstream, createHeaders, subject, ... }', raw);
  }
  const options = raw as Record<string, unknown>;
  rejectUnknownKeys('natsRelay', options, KEYS);
  const jetstream = options.jetstream as Partial<JetStreamClientLike> | null | undefined;
  if (typeof jetstream !== 'object' || jetstream === null || typeof jetstream.publish !== 'function') {
    throw invalidOption(
      'natsRelay.jetstream',
      'a JetStream client: jetstream(nc) from @nats-io/jetstream',
      jetstream,
    );
  }
  if (typeof options.createHeaders !== 'function') {
    throw invalidOption(
      'natsRelay.createHeaders',
      "the headers function of the NATS client (import { headers } from '@nats-io/transport-node')",
      options.createHeaders,
    );
  }
  const { fixedSubject, subject } = resolveSubject(options.subject);
  return Object.freeze({
    jetstream: jetstream as JetStreamClientLike,
    createHeaders: options.createHeaders as () => NatsHeadersLike,
    fixedSubject,
    subject,
    strictOrder: booleanOption('strictOrder', options.strictOrder, true),
    timeout: integerOption('natsRelay.timeout', options.timeout, 5000, 1, 2 ** 31 - 1),
    checkStream: booleanOption('checkStream', options.checkStream, true),
    messageId: messageIdOption(options.messageId),
    name: nameOption(options.name),
  });
}

function resolveSubject(value: unknown): Pick<ResolvedNatsOptions, 'fixedSubject' | 'subject'> {
  if (typeof value === 'function')
    return { fixedSubject: undefined, subject: value as (envelope: Envelope) => string };
  const problem = subjectProblem(value);
  if (problem !== undefined) {
    throw invalidOption(
      'natsRelay.subject',
      `a subject to publish to such as "orders.events" (${problem}) or a function (envelope) => subject`,
      value,
    );
  }
  return { fixedSubject: value as string, subject: () => value as string };
}

function booleanOption(option: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw invalidOption(`natsRelay.${option}`, 'true or false', value);
  return value;
}

function messageIdOption(value: unknown): (envelope: Envelope) => string {
  if (value === undefined) return (envelope) => String(envelope.id);
  if (typeof value !== 'function')
    throw invalidOption('natsRelay.messageId', 'a function (envelope) => string', value);
  return value as (envelope: Envelope) => string;
}

function nameOption(value: unknown): string {
  if (value === undefined) return 'nats';
  if (typeof value !== 'string' || value.length === 0)
    throw invalidOption('natsRelay.name', 'a non-empty string', value);
  return value;
}
