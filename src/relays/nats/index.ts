/**
 * outboxer/nats: relay outbox messages to NATS JetStream through your own JetStream client, with
 * `Nats-Msg-Id` deduplication. See docs/relays/nats.md.
 * @packageDocumentation
 */
export { natsRelay } from './nats-relay.js';
export type { NatsRelayOptions } from './nats-options.js';
export type {
  JetStreamClientLike,
  NatsHeadersLike,
  NatsPubAckLike,
  NatsPublishOptions,
} from './nats-client.js';
export * from '../../receivers/nats/index.js';
