/**
 * The RabbitMQ receiver: each delivery handled once through an inbox, acked after the
 * transaction. Exported from `outboxer/rabbitmq`, beside the relay.
 */
export {
  rabbitmqReceiver,
  type RabbitMqReceiverOptions,
  type RabbitMqReceiverOwnOptions,
  type AmqpDeliveryLike,
  type AmqpConsumeChannelLike,
} from './rabbitmq-receiver.js';
