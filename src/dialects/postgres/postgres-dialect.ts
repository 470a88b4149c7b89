import type { Dialect } from '../../core/dialect.js';
import {
  blockedCounts,
  blockedGroups,
  counts,
  discard,
  findMessages,
  list,
  migrationLock,
  missingSchemaObject,
  readConfiguration,
  retryDead,
  serverVersion,
  writeConfiguration,
} from './admin.js';
import { compactTallies, nextRetryAt, prune, recount } from './housekeeping.js';
import {
  acquireLease,
  acquireLeases,
  countRewind,
  heartbeat,
  nodes,
  partitions,
  releaseLease,
  removeNode,
  leave,
  renewLease,
} from './leases.js';
import { postgresInbox } from './inbox.js';
import { poll } from './poll.js';
import { postgresSchema } from './postgres-schema.js';
import { insert } from './publish.js';
import { acknowledgeAndPoll, hold, releaseOrphanedHolds, settle } from './settle.js';
import { hasErrorCode, POSTGRES_CONFLICTS } from '../shared/conflicts.js';

/**
 * Every statement outboxer runs on Postgres, one file per statement family, each with its locking
 * strategy beside it: publish.ts (the INSERT, notify coalescing, `serializeWrites` locks), poll.ts
 * (the poll and where it starts), settle.ts (settle, acknowledge-and-poll, hold and unhold),
 * leases.ts (leases, heartbeats, rewinds), housekeeping.ts (prune, tallies, next retry) and
 * admin.ts (counts, listings, admin changes, configuration, migration). Each returns a statement
 * that carries the reader of its own rows.
 */

// The late-commit test runs the in-flight subquery on a snapshot of its own.
export { inFlight } from './poll.js';

// `satisfies`, not a type annotation: callers that use this dialect directly (tests, the CLI) keep
// its single statements' types.
export const postgresDialect = Object.freeze({
  inbox: postgresInbox,
  name: 'postgres' as const,
  capabilities: Object.freeze({
    notifications: true,
    advisoryLocks: true,
    concurrentWriters: true,
    pollCursor: true,
    readyOnlyPoll: false,
    rejectsNulCharacters: true,
  }),
  isConflict: (error: unknown) => hasErrorCode(error, POSTGRES_CONFLICTS),
  schema: postgresSchema,
  // Concurrent migrate() calls queue on one transaction-scoped advisory lock.
  migrationLock,
  insert,
  poll,
  countRewind,
  hold,
  nextRetryAt,
  settle,
  acknowledgeAndPoll,
  acquireLease,
  acquireLeases,
  renewLease,
  releaseLease,
  heartbeat,
  removeNode,
  leave,
  counts,
  tallies: Object.freeze({ compact: compactTallies, recount }),
  readConfiguration,
  writeConfiguration,
  serverVersion,
  // pg_current_snapshot() and xid8 (where a poll starts) need 13.
  minimumVersion: { number: 130000, name: 'PostgreSQL 13' },
  list,
  findMessages,
  partitions,
  nodes,
  retryDead,
  discard,
  releaseOrphanedHolds,
  blockedCounts,
  blockedGroups,
  prune,
  missingSchemaObject,
} satisfies Dialect);
