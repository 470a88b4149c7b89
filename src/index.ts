/**
 * outboxer: the transactional outbox for Node.js and TypeScript.
 * @packageDocumentation
 */
export { Outboxer } from './core/outboxer.js';
export type {
  OutboxerOptions,
  Counts,
  CountsOptions,
  BlockedGroup,
  BlockedGroupCounts,
  BlockedGroupHead,
  BlockedGroupsOptions,
  PublishInput,
  FindMessagesOptions,
  FoundMessage,
  MessagePage,
  MessageState,
  NodeState,
  PartitionState,
} from './core/api.js';
export type { OutboxOptions, Ordering, Retention, ResolvedOutbox } from './core/options.js';
export type { PublishOptions } from './core/encoding.js';
export {
  defineMessage,
  isMessage,
  type Message,
  type MessageDefinition,
  type MessageFactory,
} from './core/message.js';
export {
  functionRelay,
  batchRelay,
  deliverEach,
  orderingKey,
  SKIPPED,
  type Relay,
  type Envelope,
  type Headers,
  type DeliveryContext,
  type DeliveryOutcome,
} from './core/relay.js';
export { payloadJson } from './core/payload.js';
export {
  OutboxerError,
  DeliveryError,
  PermanentError,
  LeaseLostError,
  isOutboxerError,
  ERROR_CODES,
  type ErrorCode,
  type DeliveryErrorOptions,
} from './core/errors.js';
export type { Logger } from './core/logger.js';
export type { Inbox, InboxHandler, InboxMessage, InboxOutcome } from './core/inbox/inbox.js';
export type { InboxOptions } from './core/inbox/options.js';
export type { InboxProcessOptions, StoredMessage } from './core/inbox/process.js';
export type { StoreMessage, StoreOutcome } from './core/inbox/store.js';
export type { InboxOrder } from './core/inbox/order.js';
export {
  MissingMessageIdError,
  type ReceivedMessage,
  type ReceiveOutcome,
  type HandlingReceiverOptions,
  type ReceiverCommonOptions,
  type ReceiverHandler,
  type ReceiverOptions,
  type StoringReceiverOptions,
  type TransactionRunner,
} from './core/inbox/receiver.js';
export type { DrainOptions, DrainResult } from './core/testing.js';
export { channels } from './core/telemetry.js';
export { hashGroupKey } from './core/partitioning.js';
export type {
  DatabaseAdapter,
  Dialect,
  DialectCapabilities,
  SqlQuery,
  Row,
  Statement,
  Statements,
  Batch,
  ListenHandlers,
  Listener,
} from './core/database.js';
