/**
 * The parts of the NATS JetStream client the relay uses, described structurally so that
 * `outboxer/nats` imports nothing from `@nats-io/*`, and what its errors mean for outboxer.
 */
import { DeliveryError, OutboxerError, PermanentError } from '../../core/errors.js';

/** A NATS header set (`MsgHdrs`), as made by the client's `headers()` function. */
export interface NatsHeadersLike {
  set(key: string, value: string): void;
}

/** The PubAck of a JetStream publish. `duplicate`: the stream already had this `Nats-Msg-Id`. */
export interface NatsPubAckLike {
  readonly stream: string;
  readonly seq: number;
  readonly duplicate: boolean;
}

/** The publish options the relay sets; `H` is the client's header type (`MsgHdrs`). */
export interface NatsPublishOptions<H extends NatsHeadersLike = NatsHeadersLike> {
  /** Sent as the `Nats-Msg-Id` header: the stream drops a repeat within its duplicate window. */
  msgID: string;
  headers: H;
  timeout: number;
}

/**
 * The part of a JetStream client (`jetstream(nc)` from `@nats-io/jetstream` 3.x) the relay calls.
 * `H` is the client's header type, which the relay gets from `createHeaders`.
 *
 * @example
 * import { connect } from '@nats-io/transport-node';
 * import { jetstream } from '@nats-io/jetstream';
 * const nc = await connect({ servers: '127.0.0.1:4222', maxReconnectAttempts: -1 });
 * const client: JetStreamClientLike = jetstream(nc);
 */
export interface JetStreamClientLike<H extends NatsHeadersLike = NatsHeadersLike> {
  publish(subject: string, payload: string, options: NatsPublishOptions<H>): Promise<NatsPubAckLike>;
  jetstreamManager(): Promise<{ streams: { find(subject: string): Promise<string> } }>;
}

function text(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function nameOf(error: unknown): string {
  return typeof error === 'object' && error !== null ? String((error as { name?: unknown }).name) : '';
}

/**
 * What a failed publish means: a message the server will never take (too large, a header or
 * subject it cannot carry) is permanent; everything else (no stream, no PubAck in time, stream
 * limits, connection lost) is retryable, with a message that says what to check.
 */
export function publishFailure(error: unknown, subject: string, timeout: number): DeliveryError {
  const message = text(error);
  const name = nameOf(error);
  const code = (error as { code?: unknown })?.code;
  if (
    name === 'JetStreamNotEnabled' ||
    /no responders/i.test(message) ||
    /no responders/i.test(text((error as Error)?.cause))
  ) {
    return new DeliveryError(
      `No JetStream stream captures subject "${subject}" (NATS answered "no responders"; or JetStream is not enabled on the server). Create a stream whose subjects include it; the message will be sent again.`,
      { cause: error },
    );
  }
  if (code === 10054 || /message size exceeds maximum|max_payload/i.test(message)) {
    return new PermanentError(
      `NATS refused the message as too large: ${message} (the stream's max_msg_size or the server's max_payload).`,
      { cause: error },
    );
  }
  if (name === 'InvalidSubjectError' || name === 'InvalidArgumentError') {
    return new PermanentError(`NATS cannot send the message: ${message}`, { cause: error });
  }
  if (name === 'TimeoutError' || /timeout/i.test(message)) {
    return new DeliveryError(
      `No PubAck from JetStream within ${timeout} ms (server unreachable or slow); the message will be sent again, and the stream drops the repeat if the first one was stored within its duplicate window.`,
      { cause: error },
    );
  }
  if (name === 'ClosedConnectionError' || /closed connection|connection closed/i.test(message)) {
    return new DeliveryError(
      `The NATS connection is closed for good (it was closed, or the client gave up reconnecting): the relay cannot reopen it. Connect with maxReconnectAttempts: -1 so that the client keeps trying through outages. (${message})`,
      { cause: error },
    );
  }
  return new DeliveryError(`JetStream did not store the message: ${message}`, { cause: error });
}

/** True when a failure of the start-up check is a setting to fix rather than an outage. */
export function startCheckFailure(error: unknown, subject: string): OutboxerError | undefined {
  const message = text(error);
  const name = nameOf(error);
  if (name === 'StreamNotFoundError' || /no stream matches subject/i.test(message)) {
    return new OutboxerError(
      'RELAY_MISCONFIGURED',
      `No JetStream stream captures subject "${subject}". Create one before starting (jsm.streams.add({ name: 'ORDERS', subjects: ['${subject}'] })), or fix natsRelay.subject.`,
      { cause: error },
    );
  }
  if (name === 'JetStreamNotEnabled' || /jetstream is not enabled|no responders/i.test(message)) {
    return new OutboxerError(
      'RELAY_MISCONFIGURED',
      `JetStream is not enabled on this NATS server (start nats-server with -js). (${message})`,
      { cause: error },
    );
  }
  if (/permissions violation|authorization/i.test(message)) {
    return new OutboxerError(
      'RELAY_MISCONFIGURED',
      `The NATS user may not use the JetStream API or publish to "${subject}": ${message}`,
      { cause: error },
    );
  }
  return undefined;
}
