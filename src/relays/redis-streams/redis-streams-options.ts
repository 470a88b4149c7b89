import { integerOption, invalidOption, rejectUnknownKeys } from '../../core/options.js';
import type { Envelope } from '../../core/relay.js';
import type { RedisClientLike } from './redis-streams-client.js';

/** Options of {@link redisStreamsRelay}. */
export interface RedisStreamsRelayOptions {
  /**
   * Your ioredis client (`new Redis(...)`). The relay never closes it. ioredis reconnects by itself
   * and queues commands meanwhile; keep its default `enableOfflineQueue: true`.
   */
  redis: RedisClientLike;
  /**
   * The stream key of a message: a fixed key or a function of the envelope, e.g. one stream per
   * group: `(m) => 'orders:' + (m.groupKey ?? 'none')`.
   */
  stream: string | ((envelope: Envelope) => string);
  /**
   * Trim each stream to about this many entries as messages are added (`XADD … MAXLEN ~ n`).
   * Trimming drops the oldest entries whether or not consumers have read them. Default: no trimming.
   */
  maxLength?: number;
  /**
   * Default true: at most one message per group (per ordering key) in each pipeline, so a message
   * Redis refuses is never overtaken by a later one of its group. A batch takes as many round trips
   * as its largest group has messages. False sends the whole batch in one pipeline. See
   * docs/relays/redis-streams.md.
   */
  strictOrder?: boolean;
  /**
   * Milliseconds to wait for the replies of one pipeline (ioredis holds commands while it
   * reconnects). Default 10000.
   */
  timeout?: number;
  /**
   * Check in `start()` that Redis accepts the client (PING) and that a fixed stream key is a
   * stream or does not exist yet: RELAY_MISCONFIGURED otherwise. Default true.
   */
  checkStream?: boolean;
  /** Shown in logs and telemetry. Default `'redis-streams'`. */
  name?: string;
}

export interface ResolvedRedisStreamsOptions {
  readonly redis: RedisClientLike;
  /** The fixed stream key, or undefined when it is a function. */
  readonly fixedStream: string | undefined;
  readonly stream: (envelope: Envelope) => string;
  readonly maxLength: number | undefined;
  readonly strictOrder: boolean;
  readonly timeout: number;
  readonly checkStream: boolean;
  readonly name: string;
}

const KEYS = ['redis', 'stream', 'maxLength', 'strictOrder', 'timeout', 'checkStream', 'name'] as const;

/** Validates the options once, in the factory. */
export function resolveRedisStreamsOptions(raw: unknown): ResolvedRedisStreamsOptions {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw invalidOption('redisStreamsRelay(options)', 'an object { redis, stream, ... }', raw);
  }
  const options = raw as Record<string, unknown>;
  rejectUnknownKeys('redisStreamsRelay', options, KEYS);
  const redis = options.redis as Partial<RedisClientLike> | null | undefined;
  if (typeof redis !== 'object' || redis === null || typeof redis.pipeline !== 'function') {
    throw invalidOption('redisStreamsRelay.redis', 'an ioredis client (new Redis(...) from ioredis)', redis);
  }
  const stream = options.stream;
  if (typeof stream !== 'function' && (typeof stream !== 'string' || stream.length === 0)) {
    throw invalidOption(
      'redisStreamsRelay.stream',
      'a stream key (a non-empty string) or a function (envelope) => key',
      stream,
    );
  }
  return Object.freeze({
    redis: redis as RedisClientLike,
    fixedStream: typeof stream === 'string' ? stream : undefined,
    stream: typeof stream === 'string' ? () => stream : (stream as (envelope: Envelope) => string),
    maxLength:
      options.maxLength === undefined
        ? undefined
        : integerOption('redisStreamsRelay.maxLength', options.maxLength, 0, 1, Number.MAX_SAFE_INTEGER),
    strictOrder: booleanOption('strictOrder', options.strictOrder, true),
    timeout: integerOption('redisStreamsRelay.timeout', options.timeout, 10_000, 1, 2 ** 31 - 1),
    checkStream: booleanOption('checkStream', options.checkStream, true),
    name: nameOption(options.name),
  });
}

function booleanOption(option: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw invalidOption(`redisStreamsRelay.${option}`, 'true or false', value);
  return value;
}

function nameOption(value: unknown): string {
  if (value === undefined) return 'redis-streams';
  if (typeof value !== 'string' || value.length === 0)
    throw invalidOption('redisStreamsRelay.name', 'a non-empty string', value);
  return value;
}
