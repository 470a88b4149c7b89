import type { LeaseToken } from '../../core/dialect.js';
import { Status } from '../../core/sql.js';
import type { Parameters } from '../shared/parameters.js';

/**
 * The pieces several statement families share: the columns a poll or a listing reads, the
 * statuses that hold a group back, and the lease fence every write of a worker carries. Same
 * layout and status values as Postgres; times are Unix milliseconds from the process clock, passed
 * in (SQLite is single-node). Arrays travel as one JSON parameter read with `json_each`. SQLite has
 * one writer at a time, so no row locks are needed.
 */

/** What a poll or a listing reads (see `readEnvelope`). */
export const COLUMNS = `id, partition, group_key, type, payload, headers, attempts, last_error, next_attempt_at, failing_since, inserted_at, status`;

/** {@link COLUMNS} of the message table aliased `m`. */
export const M_COLUMNS = COLUMNS.split(', ')
  .map((c) => `m.${c}`)
  .join(', ');

/**
 * The statuses that hold a group back, unspelled: for the total order's head, read from `_retry`
 * by partition, and the list of heads. Probes of one group use `blockingStatus` (shared/statuses.ts).
 */
export function blocking(parkDead: boolean): string {
  return parkDead ? `IN (${Status.retry}, ${Status.dead})` : `= ${Status.retry}`;
}

/** The lease row of the token, as a condition on the columns of `<table>_leases`. */
export function ownsLease(p: Parameters, lease: LeaseToken): string {
  return `outbox = ${p.add(lease.outbox)} AND partition = ${p.add(lease.partition)} AND owner = ${p.add(lease.owner)} AND epoch = ${p.add(lease.epoch)}`;
}

/** `true` when the lease still belongs to the worker. */
export function fence(p: Parameters, leases: string, lease: LeaseToken): string {
  return `EXISTS (SELECT 1 FROM ${leases} WHERE ${ownsLease(p, lease)})`;
}
