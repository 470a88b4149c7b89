/**
 * The part of ioredis the relay uses, described structurally so that `outboxer/redis-streams`
 * imports nothing from ioredis; the entry layout; and what Redis errors mean for outboxer.
 */
import { DeliveryError, OutboxerError } from '../../core/errors.js';
import type { Envelope } from '../../core/relay.js';
import { payloadJson } from '../../core/payload.js';
import { standardHeaders } from '../shared/headers.js';

/** A pipeline of commands sent in one round trip; `exec` gives `[error, reply]` per command. */
export interface RedisPipelineLike {
  exec(): Promise<Array<[error: Error | null, reply: unknown]> | null>;
}

/**
 * The part of an ioredis client (`Redis` or `Cluster`) the relay calls: a pipeline built from an
 * array of commands.
 *
 * @example
 * import { Redis } from 'ioredis';
 * const redis: RedisClientLike = new Redis('redis://127.0.0.1:6379');
 */
export interface RedisClientLike {
  pipeline(commands: string[][]): RedisPipelineLike;
  /** ioredis's connection status: `'ready'`, `'reconnecting'`, `'end'`… */
  readonly status?: string;
}

/** Statuses in which ioredis would only queue commands (or reject them): the relay does not send then. */
const DOWN = new Set(['reconnecting', 'close', 'end']);

/**
 * A retryable error when the client is known to be down, so that no command is queued: ioredis
 * keeps commands sent while it reconnects and runs them once it is back, and every retry during an
 * outage would add one more copy of the same message.
 */
export function clientDown(redis: RedisClientLike): DeliveryError | undefined {
  if (redis.status === undefined || !DOWN.has(redis.status)) return undefined;
  return new DeliveryError(
    redis.status === 'end'
      ? 'The ioredis client is closed (quit() or disconnect() was called, or its retryStrategy gave up): the relay cannot reopen it.'
      : `Redis is unreachable (the ioredis client is ${redis.status}); the message will be sent once it is back.`,
  );
}

/**
 * The fields of a stream entry, in this order:
 * - `id`: the outbox id (decimal), what consumers deduplicate on;
 * - `outbox`: the outbox name;
 * - `type`: the message type (left out when it has none);
 * - `groupKey`: the group key (left out when it has none);
 * - `payload`: the payload as JSON;
 * - `headers`: JSON object of the message's headers plus the standard `outboxer-*` headers.
 */
export function entryFields(envelope: Envelope): string[] {
  const fields = ['id', String(envelope.id), 'outbox', envelope.outbox];
  if (envelope.type !== null) fields.push('type', envelope.type);
  if (envelope.groupKey !== null) fields.push('groupKey', envelope.groupKey);
  fields.push('payload', payloadJson(envelope), 'headers', JSON.stringify(standardHeaders(envelope)));
  return fields;
}

/** The XADD command of a message: `XADD key [MAXLEN ~ n] * field value …`. */
export function xaddCommand(key: string, envelope: Envelope, maxLength: number | undefined): string[] {
  const trim = maxLength === undefined ? [] : ['MAXLEN', '~', String(maxLength)];
  return ['xadd', key, ...trim, '*', ...entryFields(envelope)];
}

function text(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * What a failed XADD means. Redis never refuses a stream entry for what it contains, so every
 * failure is retryable; the message says what to check.
 */
export function xaddFailure(error: unknown, key: string): DeliveryError {
  const message = text(error);
  const hint = /^WRONGTYPE/.test(message)
    ? ` The key "${key}" holds another type than a stream: delete it or choose another stream key.`
    : /^OOM/.test(message)
      ? ' Redis is out of memory (maxmemory): trim the streams (maxLength), raise maxmemory or use an eviction policy that frees memory.'
      : /^(NOAUTH|WRONGPASS|NOPERM)/.test(message)
        ? ' Check the credentials and the ACL of the Redis user (it needs XADD on this key).'
        : /^READONLY/.test(message)
          ? ' The client is connected to a read-only replica: connect to the primary.'
          : /connection is closed/i.test(message)
            ? ' The ioredis client is closed (quit() or disconnect() was called, or its retryStrategy gave up): the relay cannot reopen it.'
            : '';
  return new DeliveryError(
    `XADD to stream "${key}" failed: ${message}${/[.!]$/.test(message) ? '' : '.'}${hint}`,
    { cause: error },
  );
}

/** A start-up check failure that is a setting to fix, or undefined for an outage. */
export function startCheckFailure(error: unknown): OutboxerError | undefined {
  const message = text(error);
  if (/^(NOAUTH|WRONGPASS|NOPERM)/.test(message)) {
    return new OutboxerError(
      'RELAY_MISCONFIGURED',
      `Redis refused the client: ${message} Check the user name, password and ACL of the ioredis client.`,
      { cause: error },
    );
  }
  return undefined;
}
