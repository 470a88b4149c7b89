import { Status } from '../../core/sql.js';

/**
 * The statuses that hold a group back, as a condition on `status` (a column reference): a
 * retrying message, and a dead one when dead messages park their group. Spelled with the
 * `_blocking` index's own predicate (status IN (retry, dead)), so that both databases probe that
 * index by group key: otherwise Postgres walks `_retry` instead and SQLite, which uses a partial
 * index only when the query repeats its condition, scans; either is an order of magnitude slower a
 * poll with thousands of blocked groups (docs/benchmarks.md).
 */
export function blockingStatus(parkDead: boolean, status = 'status'): string {
  const blocking = `${status} IN (${Status.retry}, ${Status.dead})`;
  return parkDead ? blocking : `${blocking} AND ${status} <> ${Status.dead}`;
}
