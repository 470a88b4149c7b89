import type { LeaseToken, SettleParams, SettleResult } from '../../core/dialect.js';
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
import { lockedLeaseIs, lockLeaseRow, renewQuery } from './leases.js';
import { byIds, fence, NOW_MS, TALLY_COLUMNS } from './shared.js';
import { tables, type Tables } from './tables.js';

/**
 * Settling: what a worker writes once it has delivered (acknowledge, retry, dead-letter, release
 * the groups it unblocked), and moving the ready rows of blocked groups out of the poll's way.
 *
 * Locking: a settle is one transaction. It locks the partition's lease row first, whoever holds
 * it (`lockLeaseRow`: a takeover, and a settle of another holder, wait until the settle ends), and
 * reads from that locked row whether the lease is still its own (`lockedLeaseIs`); it renews the
 * lease; when lost, every later statement, fenced on the lease, writes nothing. It then locks the
 * rows it settles (`SELECT … FOR UPDATE` by primary key), so the tally it writes next and the change after it see
 * the same rows whatever the isolation level (an admin `discard()` locks them the same way first).
 * The groups it unblocks are released by statements of their own, after the head changed.
 *
 * The lock and the DELETE reach their rows from the list of ids (`byIds`: one primary-key lookup
 * each), not by `id IN (…)`: when the table's statistics say it is empty, as they do of a drained
 * outbox until InnoDB recalculates them, MariaDB reads `id IN (…)` by a scan of the whole table
 * (FORCE INDEX or not), and a locking scan waits for every row it steps over: two partitions'
 * settles then waited on each other's rows and deadlocked (test/engine/mysql-settle-locks.test.ts).
 */

const readIds = (rows: readonly Row[]): number[] => rows.map((row) => Number(row.id));

export function settle(table: QualifiedName, params: SettleParams): Batch<SettleResult> {
  const t = tables(table);
  const { lease } = params;
  const statements: SqlQuery[] = [
    lockLeaseRow(t.leases, lease.outbox, lease.partition),
    renewQuery(t.leases, lease, params.ttl),
  ];
  const settled = [...params.delivered, ...params.failed.map((f) => f.id)];
  if (settled.length > 0) {
    const p = Parameters.positional();
    statements.push(
      p.query(`SELECT m.id FROM ${byIds(p.add(JSON.stringify(settled)), t.messages, 'm')} FOR UPDATE`, true),
    );
  }
  if (params.delivered.length > 0) statements.push(...acknowledge(t, params));
  if (params.failed.length > 0) statements.push(...fail(t, params));
  const unblocking = params.unblockedGroups.length > 0;
  if (unblocking) statements.push(...unhold(t, lease.outbox, params.unblockedGroups, params.parkDead));
  return batch(statements, (results) => ({
    leaseHeld: lockedLeaseIs(results[0] ?? [], lease),
    // The rows the unhold locked, second to last: the ids released.
    released: unblocking ? readIds(results[results.length - 2] ?? []) : [],
  }));
}

/** The delivered messages' tally, then their acknowledgement (deleted, or kept as delivered). */
function acknowledge({ messages, messagesById, leases, tallies }: Tables, params: SettleParams): SqlQuery[] {
  const { lease } = params;
  const tally = Parameters.positional();
  const change = Parameters.positional();
  // Removed rows by the status they had; kept ones move from pending to delivered. Positional
  // placeholders: every value is added where its text is written, left to right.
  const figures = params.keep
    ? '-COUNT(*), 0, COUNT(*)'
    : `-COALESCE(SUM(status < ${Status.dead}), 0), -COALESCE(SUM(status = ${Status.dead}), 0), -COALESCE(SUM(status = ${Status.delivered}), 0)`;
  const kept = params.keep ? ` AND status < ${Status.dead}` : '';
  const tallied = tally.query(
    `INSERT INTO ${tallies} ${TALLY_COLUMNS} SELECT ${tally.add(lease.outbox)}, ${tally.add(lease.partition)}, ${figures} FROM ${messagesById()}
WHERE id IN (${tally.list(params.delivered)})${kept} AND ${fence(tally, leases, lease)} HAVING COUNT(*) > 0`,
    true,
  );
  const acknowledged = params.keep
    ? change.query(
        `UPDATE ${messagesById()} SET status = ${Status.delivered}, delivered_at = ${NOW_MS}, next_attempt_at = NULL WHERE id IN (${change.list(params.delivered)}) AND status < ${Status.dead} AND ${fence(change, leases, lease)}`,
        true,
      )
    : change.query(
        `DELETE m FROM ${byIds(change.add(JSON.stringify(params.delivered)), messages, 'm')} WHERE ${fence(change, leases, lease)}`,
        true,
      );
  return [tallied, acknowledged];
}

/** The failed messages: the tally of those that die, then each one's retry or death. */
function fail({ messagesById, leases, tallies }: Tables, params: SettleParams): SqlQuery[] {
  const { lease, failed } = params;
  const dead = failed.filter((f) => f.dead).map((f) => f.id);
  const statements: SqlQuery[] = [];
  if (dead.length > 0) {
    const tally = Parameters.positional();
    statements.push(
      tally.query(
        `INSERT INTO ${tallies} ${TALLY_COLUMNS} SELECT ${tally.add(lease.outbox)}, ${tally.add(lease.partition)}, -COUNT(*), COUNT(*), 0 FROM ${messagesById()}
WHERE id IN (${tally.list(dead)}) AND status < ${Status.dead} AND ${fence(tally, leases, lease)} HAVING COUNT(*) > 0`,
      ),
    );
  }
  // One UPDATE, each message's values chosen by id. A single-table UPDATE assigns left to right,
  // each assignment seeing the ones before: none here reads a column assigned before it.
  const p = Parameters.positional();
  const byId = (value: (f: (typeof failed)[number]) => string) =>
    `CASE id ${failed.map((f) => `WHEN ${p.add(f.id)} THEN ${value(f)}`).join(' ')} END`;
  statements.push(
    p.query(`UPDATE ${messagesById()} SET attempts = attempts + 1,
  last_error = ${byId((f) => p.add(f.error))},
  status = ${byId((f) => String(f.dead ? Status.dead : Status.retry))},
  next_attempt_at = ${byId((f) => (f.dead ? 'NULL' : `${NOW_MS} + ${p.add(Math.max(0, Math.round(f.delay)))}`))},
  failing_since = COALESCE(failing_since, ${NOW_MS})
WHERE id IN (${p.list(failed.map((f) => f.id))}) AND status < ${Status.dead} AND ${fence(p, leases, lease)}`),
  );
  return statements;
}

/**
 * The group keys of the blocking heads of `groups` (or of every group of the outbox), as a derived
 * table MySQL materialises (DISTINCT), so that an UPDATE of the message table may read it (error
 * 1093 otherwise on MySQL 8). Reads `_groups_status` (outbox, group_key, status). Never NULL: a
 * retrying or dead message without a group key blocks nothing, and one NULL in it would make the
 * release's `NOT IN` unknown for every group: nothing released, and the next message of a group
 * would go out before the ones held.
 */
function heads(
  p: Parameters,
  messages: string,
  outbox: string,
  groups: readonly string[] | undefined,
  parkDead: boolean,
): string {
  // Positional placeholders: each value is added where its text is written, left to right.
  const o = p.add(outbox);
  const keys = groups === undefined ? 'h.group_key IS NOT NULL' : `h.group_key IN (${p.list(groups)})`;
  return `SELECT group_key FROM (SELECT DISTINCT h.group_key FROM ${messages} h WHERE h.outbox = ${o} AND ${keys} AND ${blockingStatus(parkDead, 'h.status')}) AS heads`;
}

/**
 * Held messages back to ready where their group no longer has a blocking head: of `groups`, or of
 * every group of the outbox. Two statements: the rows to release, locked (returned: the ids
 * released), then the release of exactly those conditions. Reads `_groups_status`.
 */
function unhold(
  t: Tables,
  outbox: string,
  groups: readonly string[] | undefined,
  parkDead: boolean,
): SqlQuery[] {
  const { messages } = t;
  // By group: `_groups_status`, the held rows of those groups only; all groups: `_status` (outbox, status, id).
  const target = (alias: string) =>
    groups === undefined ? `${messages} ${alias}` : t.messagesByGroup(alias);
  const query = (locking: boolean): SqlQuery => {
    const p = Parameters.positional();
    const where = `m.outbox = ${p.add(outbox)} AND m.status = ${Status.held}${groups === undefined ? '' : ` AND m.group_key IN (${p.list(groups)})`} AND m.group_key NOT IN (${heads(p, messages, outbox, groups, parkDead)})`;
    return locking
      ? p.query(`SELECT m.id FROM ${target('m')} WHERE ${where} FOR UPDATE`)
      : p.query(`UPDATE ${target('m')} SET m.status = ${Status.ready} WHERE ${where}`);
  };
  return [query(true), query(false)];
}

/** Releases held messages whose group no longer has a blocking head (after an admin change). */
export function releaseOrphanedHolds(
  table: QualifiedName,
  outbox: string,
  parkDead: boolean,
): Statement<void> {
  return unread(unhold(tables(table), outbox, undefined, parkDead)[1]!);
}

/**
 * Moves ready messages of blocked groups to `held`, re-checking the block; the ids held. The
 * partition's lease row is locked first, as a settle does (`lockLeaseRow`). The blocking heads
 * are read with a shared lock next (`LOCK IN SHARE MODE`, which MySQL 8 still
 * accepts), so that a `discard()` removing one waits for this transaction, and its release of the
 * group's held rows then sees the rows held here; a head removed first is not found, and nothing
 * is held. The rows to hold are locked and returned, then held. Fenced on the lease.
 */
export function hold(
  table: QualifiedName,
  lease: LeaseToken,
  ids: readonly number[],
  groups: readonly string[],
  parkDead: boolean,
): Batch<number[]> {
  const t = tables(table);
  const { messages, leases } = t;
  const headLock = Parameters.positional();
  const lockHeads = headLock.query(
    `SELECT h.id FROM ${t.messagesByGroup('h')} WHERE h.outbox = ${headLock.add(lease.outbox)} AND h.group_key IN (${headLock.list(groups)}) AND ${blockingStatus(parkDead, 'h.status')} LOCK IN SHARE MODE`,
  );
  const query = (locking: boolean): SqlQuery => {
    const p = Parameters.positional();
    const where = `m.id IN (${p.list(ids)}) AND m.outbox = ${p.add(lease.outbox)} AND m.status = ${Status.ready} AND m.group_key IN (${heads(p, messages, lease.outbox, groups, parkDead)}) AND ${fence(p, leases, lease)}`;
    return locking
      ? p.query(`SELECT m.id FROM ${t.messagesById('m')} WHERE ${where} FOR UPDATE`)
      : p.query(`UPDATE ${t.messagesById('m')} SET m.status = ${Status.held} WHERE ${where}`);
  };
  return batch(
    [lockLeaseRow(leases, lease.outbox, lease.partition), lockHeads, query(true), query(false)],
    (results) => readIds(results[2] ?? []),
  );
}
