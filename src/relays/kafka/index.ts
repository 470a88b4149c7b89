/**
 * `outboxer/kafka`: relay outbox messages to Apache Kafka through @platformatic/kafka or kafkajs.
 * @packageDocumentation
 */
export { kafkaRelay, type KafkaRelayOptions } from './kafka-relay.js';
export {
  platformaticProducer,
  type PlatformaticProducerLike,
  type PlatformaticMessage,
} from './kafka-platformatic.js';
export {
  kafkajsProducer,
  type KafkajsProducerLike,
  type KafkajsAdminLike,
  type KafkajsProducerOptions,
  type KafkajsMessage,
} from './kafka-kafkajs.js';
export {
  KafkaSendError,
  type KafkaClientAdapter,
  type KafkaRecord,
  type PartitionResult,
} from './kafka-client.js';
export { murmur2, javaPartition } from './kafka-murmur2.js';
export * from '../../receivers/kafka/index.js';
