import type { LeaseToken } from '../../core/dialect.js';
import { Status } from '../../core/sql.js';
import type { Parameters } from '../shared/parameters.js';

/**
 * The pieces several MySQL statement families share. The same layout and status values as
 * Postgres; times are Unix milliseconds (BIGINT) from the server's clock, so that nodes agree on
 * leases whatever their own clocks say. Lists of values are one placeholder each (`IN (?, ?)`):
 * MySQL has no array parameters, and a list is what its range optimizer reads best.
 *
 * What MySQL and MariaDB both lack, and how the dialect does without it:
 * - `RETURNING` on UPDATE (MariaDB 10.5+ has it on INSERT and DELETE only; MySQL 8 nowhere): a
 *   change that must report its rows locks them first (`SELECT … FOR UPDATE`, which returns them),
 *   then changes exactly those; its statements form a `Batch` run in one transaction.
 * - data-modifying CTEs: the tallies that `counts()` sums are written by a statement of their own
 *   in the same transaction, after the rows were locked, so they agree with the change under
 *   READ COMMITTED as under REPEATABLE READ.
 * - a statement that names its target table in a subquery (MySQL 8's error 1093; MariaDB allows
 *   it): such subqueries go through a derived table with DISTINCT, which both materialise.
 * Where a set of rows is only known once locked (prune, retryDead of all), a session variable
 * carries their ids as JSON from the statement that locked them to the next ones (`JSON_TABLE`),
 * on the one connection of the transaction.
 */

/** The server's clock in Unix milliseconds, independent of the session's `time_zone`. */
export const NOW_MS = `(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)`;

/** `partition` is a reserved word in MySQL: always quoted. */
export const PARTITION = '`partition`';

/** What a poll or a listing reads (see `readEnvelope`). */
export const COLUMNS = `id, ${PARTITION}, group_key, type, payload, headers, attempts, last_error, next_attempt_at, failing_since, inserted_at, status`;

/** {@link COLUMNS} of the message table aliased `m`. */
export const M_COLUMNS = COLUMNS.split(', ')
  .map((c) => `m.${c}`)
  .join(', ');

/** The lease row of the token, as a condition on the columns of `<table>_leases`. */
export function ownsLease(p: Parameters, lease: LeaseToken): string {
  return `outbox = ${p.add(lease.outbox)} AND ${PARTITION} = ${p.add(lease.partition)} AND owner = ${p.add(lease.owner)} AND epoch = ${p.add(lease.epoch)}`;
}

/** `true` when the lease still belongs to the worker. */
export function fence(p: Parameters, leases: string, lease: LeaseToken): string {
  return `EXISTS (SELECT 1 FROM ${leases} WHERE ${ownsLease(p, lease)})`;
}

/** The figures pending, dead, delivered of the rows aggregated, named after the figure. */
export function figures(): string {
  return Object.entries({
    pending: `status < ${Status.dead}`,
    dead: `status = ${Status.dead}`,
    delivered: `status = ${Status.delivered}`,
  })
    .map(([name, where]) => `COALESCE(SUM(${where}), 0) AS ${name}`)
    .join(', ');
}

/** The columns of a tally row, in the order {@link figures} gives them. */
export const TALLY_COLUMNS = `(outbox, ${PARTITION}, pending, dead, delivered)`;

/**
 * The rows of `table` (aliased `alias`) whose ids `variable` (a session variable, or a parameter)
 * holds as a JSON array, as a join for FROM: the ids first (`STRAIGHT_JOIN`), each then one
 * primary-key lookup, whatever the table's statistics say. (`id IN (SELECT … FROM JSON_TABLE(…))`
 * is no semi-join in a single-table DELETE or UPDATE on MariaDB: it read the whole table once per
 * id, measured at seconds for a prune of 10,000; and a locking `id IN (…)` scans the whole table
 * when the statistics say it is empty: see settle.ts.)
 */
export function byIds(variable: string, table: string, alias: string): string {
  return `JSON_TABLE(${variable}, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j STRAIGHT_JOIN ${table} ${alias} ON ${alias}.id = j.id`;
}
