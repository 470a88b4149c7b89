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
import { nextRetryAt, prune } from './housekeeping.js';
import {
  acquireLease,
  heartbeat,
  nodes,
  partitions,
  releaseLease,
  removeNode,
  renewLease,
} from './leases.js';
import { sqliteInbox } from './inbox.js';
import { poll } from './poll.js';
import { insert } from './publish.js';
import { hold, releaseOrphanedHolds, settle } from './settle.js';
import { sqliteSchema } from './sqlite-schema.js';

/**
 * Every statement outboxer runs on SQLite, one file per statement family, laid out as the Postgres
 * dialect is: publish.ts (the INSERT), poll.ts, settle.ts (settle, hold and unhold), leases.ts
 * (leases, heartbeats, nodes), housekeeping.ts (prune, next retry) and admin.ts (counts, listings,
 * admin changes, configuration, migration), with shared.ts and tables.ts beside them. Each returns
 * a statement that carries the reader of its own rows, and is a pure function of its arguments:
 * the clock is passed in, never read.
 */
// `satisfies`, not a type annotation: callers that use this dialect directly (tests, the CLI) keep
// its single statements' types.
export const sqliteDialect = Object.freeze({
  inbox: sqliteInbox,
  name: 'sqlite' as const,
  capabilities: Object.freeze({
    notifications: false,
    advisoryLocks: false,
    concurrentWriters: false,
    pollCursor: false,
    readyOnlyPoll: true,
    rejectsNulCharacters: false,
  }),
  isConflict: () => false,
  schema: sqliteSchema,
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
  readConfiguration,
  writeConfiguration,
  serverVersion,
  // 3.42: unixepoch('subsec'); 3.38: ->> on JSON; 3.35: RETURNING.
  minimumVersion: { number: 3_042_000, name: 'SQLite 3.42' },
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
