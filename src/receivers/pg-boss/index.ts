/**
 * The pg-boss receiver: a work handler that handles each job once through an inbox; pg-boss
 * completes the jobs after the transactions. Exported from `outboxer/pg-boss`, beside the relay.
 */
export { pgBossReceiver, type PgBossReceiverOptions, type PgBossJobLike } from './pg-boss-receiver.js';
