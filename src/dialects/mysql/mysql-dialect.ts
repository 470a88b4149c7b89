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
import { mysqlInbox } from './inbox.js';
import {
  acquireLease,
  heartbeat,
  nodes,
  partitions,
  releaseLease,
  removeNode,
  renewLease,
} from './leases.js';
import { mysqlSchema } from './mysql-schema.js';
import { poll } from './poll.js';
import { insert } from './publish.js';
import { hold, releaseOrphanedHolds, settle } from './settle.js';
import { hasErrorCode, MYSQL_CONFLICTS } from '../shared/conflicts.js';

/**
 * Every statement outboxer runs on MySQL 8 and MariaDB 10.6+, one file per statement family, laid
 * out as the Postgres dialect is: publish.ts (the INSERT, `serializeWrites` lock rows), poll.ts,
 * settle.ts (settle, hold and unhold), leases.ts (leases, heartbeats, nodes), housekeeping.ts
 * (prune, tallies, next retry), admin.ts (counts, listings, findMessages, admin changes,
 * configuration, migration) and inbox.ts (the inbox's table and statements), with shared.ts and
 * tables.ts beside them. The same statements run on both servers;
 * work that needs `RETURNING` elsewhere is a `Batch` here (see shared.ts). Tested on MariaDB 10.11.
 *
 * Capabilities: no notifications (MySQL has no LISTEN/NOTIFY: relays poll, and a publishing
 * instance that relays wakes its own workers), per-group locks for `serializeWrites` (lock rows),
 * concurrent writers, and no poll cursor (see poll.ts: how a message committed late keeps its
 * group's order).
 */
export const mysqlDialect = Object.freeze({
  inbox: mysqlInbox,
  name: 'mysql' as const,
  capabilities: Object.freeze({
    notifications: false,
    advisoryLocks: true,
    concurrentWriters: true,
    pollCursor: false,
    readyOnlyPoll: false,
    rejectsNulCharacters: false,
  }),
  isConflict: (error: unknown) => hasErrorCode(error, MYSQL_CONFLICTS),
  schema: mysqlSchema,
  migrationLock,
  insert,
  poll,
  hold,
  nextRetryAt,
  settle,
  acquireLease,
  renewLease,
  releaseLease,
  heartbeat,
  removeNode,
  counts,
  tallies: Object.freeze({ compact: compactTallies, recount }),
  readConfiguration,
  writeConfiguration,
  serverVersion,
  // JSON_TABLE: MariaDB 10.6, MySQL 8.0.4 (see serverVersion).
  minimumVersion: { number: 100_600, name: 'MariaDB 10.6 or MySQL 8.0.4' },
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
