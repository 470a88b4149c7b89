import type {
  AcknowledgedPoll,
  LeaseToken,
  PollParams,
  SettleParams,
  SettleResult,
} from '../../core/dialect.js';
import type { QualifiedName } from '../../core/identifiers.js';
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
import { renewQuery } from './leases.js';
import { dueParam, excludeValues, pollText, readPoll, startColumns, startCtes, watchValues } from './poll.js';
import {
  addLease,
  fence,
  KEPT,
  MS,
  opaque,
  ownsLease,
  REMOVED,
  workerTally,
  type LeasePlaceholders,
} from './shared.js';
import { tables, type Tables } from './tables.js';
import { isAcknowledgeOnly } from '../../core/settlement.js';

/**
 * Settling: what a worker writes once it has delivered (acknowledge, retry, dead-letter, release
 * the groups it unblocked), and moving the ready rows of blocked groups out of the poll's way.
 *
 * Locking: a settle renews the lease first, in its own transaction: the lease row's lock makes a
 * takeover wait until the settle ends, and every later statement is fenced on the lease, so a
 * settle that lost its lease writes nothing. `hold` takes FOR SHARE on the blocking heads of the
 * groups it holds, so a settle that removes a head waits for it; the settle's unhold runs as a
 * statement of its own, after its head change, so it sees the rows such a hold held. The tallies
 * each change writes are inserted rows, not a counter anyone waits on.
 */

/**
 * The common settle (everything delivered, nothing failed, no group unblocked) as CTEs: renew the
 * lease (its row lock makes a takeover wait) and acknowledge, fenced on that renewal.
 *
 * Committed asynchronously (`synchronous_commit` off for this transaction only): the commit does
 * not wait for its WAL flush, one flush a batch that a draining relay would otherwise add to the
 * database's I/O. A Postgres crash can forget the last acknowledgements (up to three times
 * `wal_writer_delay`, 600 ms by default), whose messages are then delivered again, as at-least-once
 * allows; it cannot forget a message, since what is lost is a deletion. WAL is replayed in order,
 * so what survives is a prefix: a group's later acknowledgement never survives an earlier one.
 */
function acknowledgeCtes(
  { messages, leases, tallies }: Tables,
  keep: boolean,
  $: { readonly lease: LeasePlaceholders; readonly ttl: string; readonly delivered: string },
): string {
  const { lease } = $;
  const acknowledge = keep
    ? `UPDATE ${messages} SET status = ${Status.delivered}, delivered_at = now(), next_attempt_at = NULL WHERE id = ANY(${opaque($.delivered, 'bigint')}) AND outbox = ${lease.outbox} AND status < ${Status.dead} AND EXISTS (SELECT 1 FROM lease)`
    : `DELETE FROM ${messages} WHERE id = ANY(${opaque($.delivered, 'bigint')}) AND outbox = ${lease.outbox} AND EXISTS (SELECT 1 FROM lease)`;
  return `WITH lease AS (
  UPDATE ${leases} SET lease_until = clock_timestamp() + ${$.ttl} ${MS}
  FROM (SELECT set_config('synchronous_commit', 'off', true)) AS asynchronous_commit
  WHERE ${ownsLease(lease)} RETURNING epoch
), acknowledged AS (${acknowledge} RETURNING status
), tallied AS (${workerTally(tallies, lease, 'acknowledged', keep ? KEPT : REMOVED)})`;
}

export function settle(table: QualifiedName, params: SettleParams): Batch<SettleResult> {
  const t = tables(table);
  const read = (results: readonly (readonly Row[])[]): SettleResult => ({
    // The renewal (or the acknowledge-only statement) returns the lease row, or none when lost.
    leaseHeld: (results[0]?.length ?? 0) > 0,
    // The unhold, last: the ids released from `held`.
    released:
      params.unblockedGroups.length > 0
        ? (results[results.length - 1] ?? []).map((row) => Number(row.id))
        : [],
  });
  if (isAcknowledgeOnly(params)) {
    // One autocommit statement. Returns the lease row, or none when lost.
    const p = Parameters.numbered();
    const lease = addLease(p, params.lease);
    const ttl = p.add(params.ttl);
    const delivered = p.add(params.delivered);
    return batch(
      [
        p.query(
          `${acknowledgeCtes(t, params.keep, { lease, ttl, delivered })}\nSELECT epoch FROM lease`,
          true,
        ),
      ],
      read,
    );
  }
  // Row lock on the lease: a takeover waits until this transaction ends, or this finds nothing.
  const statements: SqlQuery[] = [renewQuery(t.leases, params.lease, params.ttl)];
  if (params.delivered.length > 0) statements.push(acknowledge(t, params));
  if (params.failed.length > 0) statements.push(fail(t, params));
  if (params.unblockedGroups.length > 0) {
    // A separate statement, so it sees rows held by a concurrent poll that our head change waited for.
    statements.push(unholdQuery(t.messages, params.lease.outbox, params.unblockedGroups, params.parkDead));
  }
  return batch(statements, read);
}

/** The delivered messages, acknowledged (deleted, or kept as delivered), fenced on the lease. */
function acknowledge({ messages, leases, tallies }: Tables, params: SettleParams): SqlQuery {
  const p = Parameters.numbered();
  const lease = addLease(p, params.lease);
  const ids = opaque(p.add(params.delivered), 'bigint');
  const acknowledged = params.keep
    ? `UPDATE ${messages} SET status = ${Status.delivered}, delivered_at = now(), next_attempt_at = NULL WHERE id = ANY(${ids}) AND outbox = ${lease.outbox} AND status < ${Status.dead} AND ${fence(leases, lease)}`
    : `DELETE FROM ${messages} WHERE id = ANY(${ids}) AND outbox = ${lease.outbox} AND ${fence(leases, lease)}`;
  return p.query(
    `WITH acknowledged AS (${acknowledged} RETURNING status)
${workerTally(tallies, lease, 'acknowledged', params.keep ? KEPT : REMOVED)}`,
    true,
  );
}

/** The failed messages, to retry or dead, fenced on the lease. */
function fail({ messages, leases, tallies }: Tables, params: SettleParams): SqlQuery {
  const f = params.failed;
  const p = Parameters.numbered();
  const lease = addLease(p, params.lease);
  const ids = p.add(f.map((x) => x.id));
  const errors = p.add(f.map((x) => x.error));
  const dead = p.add(f.map((x) => x.dead));
  const delays = p.add(f.map((x) => x.delay));
  // Only the messages that died change a figure: pending to dead.
  return p.query(
    `WITH failed AS (UPDATE ${messages} AS m SET attempts = m.attempts + 1, last_error = f.error,
  status = CASE WHEN f.dead THEN ${Status.dead} ELSE ${Status.retry} END,
  next_attempt_at = CASE WHEN f.dead THEN NULL ELSE now() + f.delay ${MS} END,
  failing_since = coalesce(m.failing_since, now())
FROM unnest(${ids}::bigint[], ${errors}::text[], ${dead}::boolean[], ${delays}::float8[]) AS f(id, error, dead, delay)
WHERE m.id = f.id AND m.outbox = ${lease.outbox} AND m.status < ${Status.dead} AND ${fence(leases, lease)} RETURNING m.status)
${workerTally(tallies, lease, 'failed', '-count(*), count(*), 0', ` WHERE status = ${Status.dead}`)}`,
    true,
  );
}

export function acknowledgeAndPoll(
  table: QualifiedName,
  settleParams: SettleParams,
  pollParams: PollParams,
): Statement<AcknowledgedPoll> {
  if (!isAcknowledgeOnly(settleParams))
    throw new Error('acknowledgeAndPoll takes an acknowledge-only settle');
  const t = tables(table);
  // The poll runs on the statement's snapshot, which still shows the rows acknowledged here: the
  // engine passes them in `exclude`, with the ones it is delivering meanwhile.
  const [excluded, excludedAbove] = excludeValues(pollParams);
  const exclude = new Set(excluded);
  if (settleParams.delivered.some((id) => !exclude.has(id)))
    throw new Error('acknowledgeAndPoll: every acknowledged id must be excluded from the poll');
  const p = Parameters.numbered();
  const lease = addLease(p, settleParams.lease);
  const ttl = p.add(settleParams.ttl);
  const delivered = p.add(settleParams.delivered);
  const limit = p.add(pollParams.limit);
  const afterId = p.add(pollParams.afterId);
  const due = p.add(dueParam(pollParams));
  const excludedIds = p.add(excluded);
  const [watched, rewindToValues] = watchValues(pollParams);
  const xids = p.add(watched);
  const rewindTo = p.add(rewindToValues);
  const above = p.add(excludedAbove);
  const rewindsSeen = p.add(pollParams.rewindsSeen ?? null);
  const { outbox, partition } = lease;
  const polled = pollText(t.messages, pollParams, {
    outbox,
    partition,
    limit,
    afterId: '(SELECT after_id FROM start)',
    due,
    exclude: { ids: excludedIds, above },
  });
  const start = startCtes(t.leases, { outbox, partition, afterId, xids, rewindTo, rewindsSeen });
  // One row per polled message, a row of nulls but the lease and start columns when the poll is
  // empty, no row when the lease is lost. The lease's epoch is on the first row only, like the
  // start columns: every other row would make the driver parse one more bigint.
  return p.statement(
    `${acknowledgeCtes(t, settleParams.keep, { lease, ttl, delivered })}, ${start}
SELECT CASE WHEN row_number() OVER () = 1 THEN lease.epoch END AS lease_epoch, ${startColumns}, polled.*
FROM lease CROSS JOIN start LEFT JOIN (${polled}) AS polled ON true`,
    (rows) => (rows.length === 0 ? undefined : readPoll(rows, settleParams.lease.outbox)),
    true,
  );
}

/** Moves ready messages of blocked groups to `held`, re-checking the block; the ids held. */
export function hold(
  table: QualifiedName,
  lease: LeaseToken,
  ids: readonly number[],
  groups: readonly string[],
  parkDead: boolean,
): Statement<number[]> {
  const { messages, leases } = tables(table);
  const p = Parameters.numbered();
  const outbox = p.add(lease.outbox);
  const groupKeys = p.add(groups);
  const held = p.add(ids);
  const owned = {
    outbox,
    partition: p.add(lease.partition),
    owner: p.add(lease.owner),
    epoch: p.add(lease.epoch),
  };
  // FOR SHARE on the blocking heads: a concurrent settle that removes a head waits for this
  // statement, and its later unhold statement then sees the rows held here. A head removed
  // first is not found, and nothing is held. Fenced on the lease like every write of a worker.
  return p.statement(
    `WITH heads AS (
  SELECT group_key FROM ${messages} WHERE outbox = ${outbox} AND ${blockingStatus(parkDead)} AND group_key = ANY(${groupKeys}::text[]) FOR SHARE
)
UPDATE ${messages} SET status = ${Status.held}
WHERE id = ANY(${held}::bigint[]) AND status = ${Status.ready} AND group_key IN (SELECT group_key FROM heads)
  AND ${fence(leases, owned)}
RETURNING id`,
    (rows) => rows.map((row) => Number(row.id)),
    true,
  );
}

/**
 * Held messages back to ready where their group no longer has a blocking head: of `groups`, or of
 * every group of the outbox. Returns the ids released.
 */
function unholdQuery(
  messages: string,
  outbox: string,
  groups: readonly string[] | undefined,
  parkDead: boolean,
): SqlQuery {
  const p = Parameters.numbered();
  const o = p.add(outbox);
  const groupFilter = groups === undefined ? '' : `AND m.group_key = ANY(${p.add(groups)}::text[])`;
  return p.query(
    `UPDATE ${messages} AS m SET status = ${Status.ready}
WHERE m.outbox = ${o} AND m.status = ${Status.held} ${groupFilter}
  AND NOT EXISTS (SELECT 1 FROM ${messages} h WHERE h.outbox = m.outbox AND h.group_key = m.group_key AND ${blockingStatus(parkDead, 'h.status')})
RETURNING m.id`,
    true,
  );
}

/** Releases held messages whose group no longer has a blocking head (after an admin change). */
export function releaseOrphanedHolds(
  table: QualifiedName,
  outbox: string,
  parkDead: boolean,
): Statement<void> {
  return unread(unholdQuery(tables(table).messages, outbox, undefined, parkDead));
}
