/**
 * outboxer/pg-boss: relay outbox messages as jobs to a pg-boss 10 queue, through your own
 * `PgBoss` instance. See docs/relays/pg-boss.md.
 * @packageDocumentation
 */
export { pgBossRelay } from './pg-boss-relay.js';
export { pgBossJobId, outboxIdOfJobId } from './pg-boss-job-id.js';
export type { PgBossRelayOptions, PgBossJobOptions, PgBossJobData } from './pg-boss-options.js';
export type { PgBossLike, PgBossJobInsert, PgBossQueueInfo } from './pg-boss-client.js';
export * from '../../receivers/pg-boss/index.js';
