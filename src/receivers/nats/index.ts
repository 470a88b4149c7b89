/**
 * The NATS JetStream receiver: each message handled once through an inbox, acked after the
 * transaction. Exported from `outboxer/nats`, beside the relay.
 */
export {
  natsReceiver,
  type NatsReceiverOptions,
  type NatsReceiverOwnOptions,
  type JetStreamMessageLike,
} from './nats-receiver.js';
