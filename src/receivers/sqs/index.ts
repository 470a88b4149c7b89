/**
 * The SQS receiver: each message handled once through an inbox, deleted from the queue after the
 * transaction. Exported from `outboxer/sqs`, beside the relay.
 */
export {
  sqsReceiver,
  type SqsReceiverOptions,
  type SqsReceiverOwnOptions,
  type SqsReceivedMessageLike,
  type SqsDeleteCommands,
} from './sqs-receiver.js';
