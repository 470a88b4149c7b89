/**
 * The Kafka receivers (@platformatic/kafka, kafkajs): each record handled once through an inbox,
 * its offset committed after the transaction. Exported from `outboxer/kafka`, beside the relay.
 */
export {
  platformaticReceiver,
  kafkajsReceiver,
  type KafkaReceiverOptions,
  type ReceivedKafkaMessage,
  type PlatformaticConsumedMessageLike,
  type KafkajsEachMessagePayloadLike,
} from './kafka-receiver.js';
