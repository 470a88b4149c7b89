/**
 * outboxer/sqs: relay outbox messages to Amazon SQS (standard and FIFO queues) through your own
 * `SQSClient` from `@aws-sdk/client-sqs` v3. See docs/relays/sqs.md.
 * @packageDocumentation
 */
export { sqsRelay } from './sqs-relay.js';
export type { SqsRelayOptions } from './sqs-options.js';
export type { SqsClientLike, SqsCommands, SqsBatchEntry, SqsStringAttribute } from './sqs-client.js';
export { defaultMessageGroupId, toSqsId, PACKED_HEADERS_ATTRIBUTE, SQS_LIMITS } from './sqs-message.js';
export * from '../../receivers/sqs/index.js';
