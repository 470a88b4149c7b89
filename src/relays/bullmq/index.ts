/**
 * outboxer/bullmq: relay outbox messages as jobs to a BullMQ queue, through your own `Queue`
 * from `bullmq`. See docs/relays/bullmq.md.
 * @packageDocumentation
 */
export { bullmqRelay } from './bullmq-relay.js';
export {
  defaultJobId,
  type BullmqRelayOptions,
  type BullmqJobOptions,
  type BullmqJobData,
} from './bullmq-options.js';
export type { BullmqQueueLike, BullmqJob, BullmqAddOptions } from './bullmq-queue.js';
export * from '../../receivers/bullmq/index.js';
