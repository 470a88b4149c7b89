import type { LeaseToken, SettleParams, SettleResult } from '../../core/dialect.js';
import { quoteName, type QualifiedName } from '../../core/identifiers.js';
import {
  batch,
  Status,
  unread,
  type Batch,
  type Row,
  type SqlQuery,
  type Statement,
} from '../../core/sql.js';
import { Parameters } from '../shared/parameters.js';
import { blockingStatus } from '../shared/statuses.js';
import { renewLease } from './leases.js';
import { fence } from './shared.js';
import { tables } from './tables.js';

/**
 * What a worker writes after delivering: acknowledgements, retries, dead letters, and the `held`
 * state of ready messages whose group is blocked. Every write is fenced on the worker's lease.
 */

const readIds = (rows: readonly Row[]): number[] => rows.map((row) => Number(row.id));

export function settle(table: QualifiedName, params: SettleParams): Batch<SettleResult> {
  const { messages, leases } = tables(table);
  const { lease, now } = params;
  const statements: SqlQuery[] = [renewLease(table, lease, params.ttl, now)];
  // Placeholders are bound in text order: each text is built left to right, in one literal.
  if (params.delivered.length > 0) {
    const p = Parameters.positional();
    statements.push(
      params.keep
        ? p.query(
            `UPDATE ${messages} SET status = ${Status.delivered}, delivered_at = ${p.add(now)}, next_attempt_at = NULL WHERE id IN (SELECT value FROM json_each(${p.json(params.delivered)})) AND status < ${Status.dead} AND ${fence(p, leases, lease)}`,
          )
        : p.query(
            `DELETE FROM ${messages} WHERE id IN (SELECT value FROM json_each(${p.json(params.delivered)})) AND ${fence(p, leases, lease)}`,
          ),
    );
  }
  if (params.failed.length > 0) {
    const p = Parameters.positional();
    const failed = params.failed.map(({ id, error, dead, delay }) => ({ id, error, dead, delay }));
    statements.push(
      p.query(`UPDATE ${messages} AS m SET attempts = m.attempts + 1, last_error = f.error,
  status = CASE WHEN f.dead THEN ${Status.dead} ELSE ${Status.retry} END,
  next_attempt_at = CASE WHEN f.dead THEN NULL ELSE ${p.add(now)} + f.delay END,
  failing_since = coalesce(m.failing_since, ${p.add(now)})
FROM (SELECT value ->> 'id' AS id, value ->> 'error' AS error, value ->> 'dead' AS dead, value ->> 'delay' AS delay FROM json_each(${p.json(failed)})) AS f
WHERE m.id = f.id AND m.status < ${Status.dead} AND ${fence(p, leases, lease)}`),
    );
  }
  const unblocking = params.unblockedGroups.length > 0;
  if (unblocking) statements.push(unhold(messages, lease.outbox, params.unblockedGroups, params.parkDead));
  // The lease renewal returns the lease row, none when the lease was lost (then nothing was written).
  return batch(statements, (results) => ({
    leaseHeld: results[0]!.length > 0,
    released: unblocking ? readIds(results[results.length - 1]!) : [],
  }));
}

export function hold(
  table: QualifiedName,
  lease: LeaseToken,
  ids: readonly number[],
  _groups: readonly string[],
  parkDead: boolean,
): Statement<number[]> {
  const { messages, leases } = tables(table);
  const p = Parameters.positional();
  return p.statement(
    `UPDATE ${messages} AS m SET status = ${Status.held}
WHERE id IN (SELECT value FROM json_each(${p.json(ids)})) AND status = ${Status.ready}
  AND EXISTS (SELECT 1 FROM ${messages} h WHERE h.outbox = m.outbox AND h.group_key = m.group_key AND ${blockingStatus(parkDead, 'h.status')})
  AND ${fence(p, leases, lease)}
RETURNING id`,
    readIds,
  );
}

/** Held messages back to ready where their group has no blocking head any more; the ids released. */
function unhold(
  messages: string,
  outbox: string,
  groups: readonly string[] | undefined,
  parkDead: boolean,
): Statement<number[]> {
  const p = Parameters.positional();
  return p.statement(
    `UPDATE ${messages} AS m SET status = ${Status.ready}
WHERE m.status = ${Status.held} ${groups === undefined ? '' : `AND m.group_key IN (SELECT value FROM json_each(${p.json(groups)}))`} AND m.outbox = ${p.add(outbox)}
  AND NOT EXISTS (SELECT 1 FROM ${messages} h WHERE h.outbox = m.outbox AND h.group_key = m.group_key AND ${blockingStatus(parkDead, 'h.status')})
RETURNING id`,
    readIds,
  );
}

export function releaseOrphanedHolds(
  table: QualifiedName,
  outbox: string,
  parkDead: boolean,
): Statement<void> {
  return unread(unhold(quoteName(table), outbox, undefined, parkDead));
}
