/**
 * outboxer/rabbitmq: relay outbox messages to a RabbitMQ exchange through your own amqplib
 * connection, with publisher confirms. See docs/relays/rabbitmq.md.
 * @packageDocumentation
 */
export { rabbitmqRelay } from './rabbitmq-relay.js';
export { defaultRoutingKey, type RabbitMqRelayOptions } from './rabbitmq-options.js';
export { toAmqpMessage, type AmqpMessage } from './rabbitmq-publish.js';
export type {
  AmqpConnectionLike,
  AmqpConfirmChannelLike,
  AmqpPublishProperties,
  AmqpReturnedMessage,
} from './rabbitmq-channel.js';
export * from '../../receivers/rabbitmq/index.js';
