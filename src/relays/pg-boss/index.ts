/**
 * outboxer/pg-boss: relay outbox messages as jobs to a pg-boss queue (pg-boss 12, 11 or 10),
 * through your own `PgBoss` instance. See docs/relays/pg-boss.md.
 * @packageDocumentation
 */
export { pgBossRelay } from './pg-boss-relay.js';
export { pgBossJobId, outboxIdOfJobId } from './pg-boss-job-id.js';
export type { PgBossRelayOptions, PgBossJobOptions, PgBossJobData } from './pg-boss-options.js';
export type {
  PgBossLike,
  PgBoss10Like,
  PgBossJobInsert,
  PgBoss10JobInsert,
  PgBossGroup,
  PgBossQueueInfo,
} from './pg-boss-client.js';
export * from '../../receivers/pg-boss/index.js';
