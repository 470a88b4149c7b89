/**
 * The BullMQ receiver: a processor that handles each job once through an inbox; BullMQ completes
 * the job after the transaction. Exported from `outboxer/bullmq`, beside the relay.
 */
export { bullmqReceiver, type BullmqReceiverOptions, type BullmqJobLike } from './bullmq-receiver.js';
