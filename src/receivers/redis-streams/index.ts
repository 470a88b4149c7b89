/**
 * The Redis Streams receiver: each entry handled once through an inbox, XACKed after the
 * transaction. Exported from `outboxer/redis-streams`, beside the relay.
 */
export {
  redisStreamsReceiver,
  type RedisStreamsReceiverOptions,
  type RedisStreamsReceiverOwnOptions,
  type RedisStreamEntry,
} from './redis-streams-receiver.js';
