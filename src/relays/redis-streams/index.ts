/**
 * outboxer/redis-streams: relay outbox messages to Redis Streams (XADD) through your own ioredis
 * client. See docs/relays/redis-streams.md.
 * @packageDocumentation
 */
export { redisStreamsRelay } from './redis-streams-relay.js';
export type { RedisStreamsRelayOptions } from './redis-streams-options.js';
export {
  entryFields,
  xaddCommand,
  type RedisClientLike,
  type RedisPipelineLike,
} from './redis-streams-client.js';
export * from '../../receivers/redis-streams/index.js';
