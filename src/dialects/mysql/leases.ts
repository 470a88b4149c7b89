import type {
  AcquireParams,
  Heartbeat,
  HeartbeatOptions,
  LeaseToken,
  NodeRow,
  PartitionRow,
} from '../../core/dialect.js';
import type { QualifiedName } from '../../core/identifiers.js';
import { batch, unread, type Batch, type Row, type SqlQuery, type Statement } from '../../core/sql.js';
import { parseJsonColumn, readDate } from '../shared/columns.js';
import { Parameters } from '../shared/parameters.js';
import { NOW_MS, ownsLease, PARTITION } from './shared.js';
import { configTable, tables } from './tables.js';

/**
 * Leases and nodes: who relays which partition, and which nodes relay at all.
 *
 * Locking: a lease is a row of `<table>_leases` per outbox and partition (its primary key).
 * Acquiring, renewing and releasing it write that row, so they wait for each other on its row
 * lock; a worker's settle renews it first, so a takeover waits until the settle's transaction ends,
 * or the settle finds the lease gone and writes nothing. Every write of a worker is fenced on the
 * lease's owner and epoch. With no `RETURNING`, acquiring and renewing are a write and a read of
 * the row in one transaction: the read finds the row only if the write left it ours.
 *
 * Times are the server's clock at the statement's start (MySQL has no `clock_timestamp()` free of
 * the session's time zone). A grant that waited for the row lock would run from before the wait,
 * and a previous holder paused inside a settle holds that lock for as long as it is paused: the
 * lease granted after it had already run out, and a third node took the partition at once while
 * the new holder started delivering it. So an acquisition locks the row first, with a statement of
 * its own, and the grant is the next statement, which starts once the wait is over.
 */

/** The new lease's epoch, or `undefined` when another live owner holds the partition. */
export function acquireLease(table: QualifiedName, params: AcquireParams): Batch<number | undefined> {
  const { leases } = tables(table);
  const p = Parameters.positional();
  // Free when expired or already ours. ON DUPLICATE KEY UPDATE assigns left to right, each
  // assignment seeing the ones before: `epoch` and `owner` test the row as it was, and
  // `lease_until` tests it after `owner` changed, which holds exactly when the others did.
  const free = () => `(lease_until < ${NOW_MS} OR owner = ${p.add(params.owner)})`;
  const upsert = `INSERT INTO ${leases} (outbox, ${PARTITION}, owner, epoch, lease_until)
VALUES (${p.add(params.outbox)}, ${p.add(params.partition)}, ${p.add(params.owner)}, 1, ${NOW_MS} + ${p.add(params.ttl)})
ON DUPLICATE KEY UPDATE
  epoch = IF(${free()}, epoch + 1, epoch),
  owner = IF(${free()}, ${p.add(params.owner)}, owner),
  lease_until = IF(${free()}, ${NOW_MS} + ${p.add(params.ttl)}, lease_until)`;
  const write = p.query(upsert);
  const lock = lockLeaseRow(leases, params.outbox, params.partition);
  const r = Parameters.positional();
  const readBack = r.query(
    `SELECT epoch FROM ${leases} WHERE outbox = ${r.add(params.outbox)} AND ${PARTITION} = ${r.add(params.partition)} AND owner = ${r.add(params.owner)}`,
  );
  return batch([lock, write, readBack], (results) => {
    const row = results[2]?.[0];
    return row === undefined ? undefined : Number(row.epoch);
  });
}

/**
 * Locks the partition's lease row, whoever holds it: the first statement of every transaction of a
 * worker that changes its partition's rows (settle, hold), and of an acquisition. They all lock
 * the lease row before any message, so they queue on it instead of deadlocking. A renewal by
 * UPDATE would not do: under READ COMMITTED an UPDATE passes over a locked row that its last
 * committed version says it does not match, so a worker paused past its lease went on, locked
 * messages the partition's new owner was settling, then waited for the lease row that owner held.
 */
export function lockLeaseRow(leases: string, outbox: string, partition: number): SqlQuery {
  const p = Parameters.positional();
  return p.query(
    `SELECT owner, epoch FROM ${leases} WHERE outbox = ${p.add(outbox)} AND ${PARTITION} = ${p.add(partition)} FOR UPDATE`,
    true,
  );
}

/**
 * Whether the row {@link lockLeaseRow} returned is still the token's lease. The lock read the row's
 * current version and holds it until the transaction ends, so a renewal fenced on the same owner
 * and epoch after it matches exactly when this says so: no read back is needed.
 */
export function lockedLeaseIs(rows: readonly Row[], lease: LeaseToken): boolean {
  const row = rows[0];
  return row !== undefined && row.owner === lease.owner && Number(row.epoch) === lease.epoch;
}

/**
 * The renewal, also a statement of a settle. Whether it held: {@link leaseRow} after it, or, where
 * the lease row was locked first, {@link lockedLeaseIs}.
 */
export function renewQuery(leases: string, lease: LeaseToken, ttl: number): SqlQuery {
  const p = Parameters.positional();
  return p.query(
    `UPDATE ${leases} SET lease_until = ${NOW_MS} + ${p.add(ttl)} WHERE ${ownsLease(p, lease)}`,
    true,
  );
}

/**
 * The lease row if it is still the token's, after the renewal in the same transaction: a
 * renewal that matched holds the row's lock, so no one else can have changed it since.
 */
export function leaseRow(leases: string, lease: LeaseToken): SqlQuery {
  const p = Parameters.positional();
  return p.query(`SELECT epoch FROM ${leases} WHERE ${ownsLease(p, lease)}`, true);
}

/**
 * The heartbeat's renewal of the node's idle leases of one outbox: one fenced UPDATE of them all and
 * one read of the rows still theirs (`renewed`), two statements however many leases, where a
 * statement pair per lease made an idle node's heartbeat grow with its partitions. The UPDATE
 * takes the outbox's lease rows in primary-key order, as the per-lease renewals did in partition
 * order; at READ COMMITTED it passes over a row another transaction holds whose last committed
 * version is not one of these leases, so it waits only for the leases it renews.
 */
function renewAll(leases: string, tokens: readonly LeaseToken[], ttl: number): SqlQuery[] {
  if (tokens.length === 0) return [];
  const held = (p: Parameters) => tokens.map((lease) => `(${ownsLease(p, lease)})`).join(' OR ');
  const u = Parameters.positional();
  const update = u.query(
    `UPDATE ${leases} SET lease_until = ${NOW_MS} + ${u.add(ttl)} WHERE ${held(u)}`,
    true,
  );
  const r = Parameters.positional();
  const read = r.query(`SELECT ${PARTITION} AS renewed FROM ${leases} WHERE ${held(r)}`, true);
  return [update, read];
}

/** False when the lease was lost. */
export function renewLease(table: QualifiedName, lease: LeaseToken, ttl: number): Batch<boolean> {
  const { leases } = tables(table);
  return batch(
    [renewQuery(leases, lease, ttl), leaseRow(leases, lease)],
    (results) => (results[1]?.length ?? 0) > 0,
  );
}

export function releaseLease(table: QualifiedName, lease: LeaseToken): Statement<void> {
  const p = Parameters.positional();
  return unread(p.query(`UPDATE ${tables(table).leases} SET lease_until = 0 WHERE ${ownsLease(p, lease)}`));
}

/**
 * Counts live relaying nodes (this one included) and returns the live leases, so the engine can
 * aim for its fair share of partitions. Nodes silent for ten lease periods are forgotten.
 *
 * Locking: the forgetting DELETE comes first, while the transaction holds no lock. InnoDB's DELETE
 * waits for the lock of every row of the outbox it scans, matching or not (only UPDATE reads a
 * locked row's last committed version instead), so after this node's own upsert it waited for
 * every other node's row that a heartbeat in flight had upserted, and two nodes beating at once
 * deadlocked, each holding its row and waiting for the other's. First, it waits holding nothing,
 * and the upsert after it locks one row.
 *
 * With `options`, the node's leases of the outbox are renewed last in the same transaction
 * ({@link renewAll}: two statements, the rows taken in primary-key order, as `countRewind`'s UPDATE
 * takes them), and the tallies' upkeep is reported ({@link upkeepDue}). `checkDue` is not (no
 * `notify` on MySQL).
 */
export function heartbeat(
  table: QualifiedName,
  outbox: string,
  nodeId: string,
  ttl: number,
  _now?: number,
  options?: HeartbeatOptions,
): Batch<Heartbeat> {
  const { nodes, leases } = tables(table);
  const renew = [...(options?.renew ?? [])].sort((a, b) => a.partition - b.partition);
  const seen = Parameters.positional();
  const forget = Parameters.positional();
  const look = Parameters.positional();
  return batch(
    [
      forget.query(
        `DELETE FROM ${nodes} WHERE outbox = ${forget.add(outbox)} AND last_seen < ${NOW_MS} - 10 * ${forget.add(ttl)}`,
      ),
      seen.query(
        `INSERT INTO ${nodes} (outbox, node_id, last_seen) VALUES (${seen.add(outbox)}, ${seen.add(nodeId)}, ${NOW_MS}) ON DUPLICATE KEY UPDATE last_seen = ${NOW_MS}`,
      ),
      look.query(
        `SELECT (SELECT 1 + COUNT(*) FROM ${nodes} WHERE outbox = ${look.add(outbox)} AND node_id <> ${look.add(nodeId)} AND last_seen > ${NOW_MS} - ${look.add(ttl)}) AS live_nodes,
  (SELECT JSON_ARRAYAGG(JSON_OBJECT('partition', ${PARTITION}, 'owner', owner, 'until', lease_until)) FROM ${leases} WHERE outbox = ${look.add(outbox)} AND lease_until >= ${NOW_MS}) AS leases${
    options === undefined ? '' : upkeepDue(look, table, outbox, options.recountEvery)
  }`,
      ),
      ...renewAll(leases, renew, ttl),
    ],
    (results) => {
      const row = results[2]![0]!;
      const held = new Set((results[4] ?? []).map((r) => Number(r.renewed)));
      // Text on MariaDB; MySQL 8 returns a JSON column, which mysql2 parses.
      const live = (parseJsonColumn(row.leases) ?? []) as Array<{
        partition: unknown;
        owner: unknown;
        until: unknown;
      }>;
      return {
        liveNodes: Math.max(1, Number(row.live_nodes)),
        leases: live.map((l) => ({
          partition: Number(l.partition),
          owner: String(l.owner),
          until: Number(l.until),
        })),
        renewed: renew.filter((l) => held.has(l.partition)).map((l) => l.partition),
        lost: renew.filter((l) => !held.has(l.partition)).map((l) => l.partition),
        due: [],
        upkeep:
          row.compact_due === undefined
            ? undefined
            : { compact: Number(row.compact_due) === 1, recount: Number(row.recount_due) === 1 },
      };
    },
  );
}

/**
 * The heartbeat's columns saying whether the tallies' upkeep has work (`Heartbeat.upkeep`): more
 * tally rows than partitions (a compaction), the last recount older than `recountEvery`. Reads the
 * outbox's few tally rows and its config row, so an idle outbox's upkeep sends nothing.
 */
function upkeepDue(p: Parameters, table: QualifiedName, outbox: string, recountEvery: number): string {
  const { tallies } = tables(table);
  return `,
  (SELECT COUNT(*) > COUNT(DISTINCT ${PARTITION}) FROM ${tallies} WHERE outbox = ${p.add(outbox)}) AS compact_due,
  COALESCE((SELECT recounted_at < ${NOW_MS} - ${p.add(recountEvery)} FROM ${configTable(table)} WHERE outbox = ${p.add(outbox)}), 0) AS recount_due`;
}

export function removeNode(table: QualifiedName, outbox: string, nodeId: string): Statement<void> {
  const p = Parameters.positional();
  return unread(
    p.query(
      `DELETE FROM ${tables(table).nodes} WHERE outbox = ${p.add(outbox)} AND node_id = ${p.add(nodeId)}`,
    ),
  );
}

/**
 * Each partition's lease row and backlog, for `partitions()`: the backlog sums the partition's
 * tallies (a few rows each, see admin.ts `counts`), the leases are a primary-key range. Partitions
 * 0 to `count - 1` are a JSON array of one parameter read by `JSON_TABLE` (a recursive CTE stops
 * at `cte_max_recursion_depth`, 1000 by default, below the 1024 partitions an outbox may have).
 * Reads only, takes no lock; `leased` is the server's clock, as leases are. A released lease
 * (`lease_until` 0) reads as no expiry.
 */
export function partitions(table: QualifiedName, outbox: string, count: number): Statement<PartitionRow[]> {
  const { leases, tallies } = tables(table);
  const p = Parameters.positional();
  const series = JSON.stringify(Array.from({ length: Math.max(0, count) }, (_, i) => i));
  return p.statement(
    `WITH backlog AS (SELECT ${PARTITION} AS part, SUM(pending) AS backlog FROM ${tallies} WHERE outbox = ${p.add(outbox)} GROUP BY ${PARTITION}),
parts AS (SELECT part FROM JSON_TABLE(${p.add(series)}, '$[*]' COLUMNS (part INT PATH '$')) AS series
  UNION SELECT part FROM backlog WHERE backlog <> 0
  UNION SELECT ${PARTITION} FROM ${leases} WHERE outbox = ${p.add(outbox)})
SELECT parts.part AS ${PARTITION}, l.owner, l.epoch, CASE WHEN l.lease_until > 0 THEN l.lease_until END AS lease_until,
  COALESCE(l.lease_until >= ${NOW_MS}, 0) AS leased, COALESCE(b.backlog, 0) AS backlog
FROM parts LEFT JOIN ${leases} l ON l.outbox = ${p.add(outbox)} AND l.${PARTITION} = parts.part LEFT JOIN backlog b ON b.part = parts.part
ORDER BY parts.part`,
    readPartitions,
  );
}

/** The rows of `partitions` (`partition`, `owner`, `epoch`, `lease_until`, `leased`, `backlog`). */
function readPartitions(rows: readonly Row[]): PartitionRow[] {
  return rows.map((row) => ({
    partition: Number(row.partition),
    owner: row.owner === null || row.owner === undefined ? null : String(row.owner),
    epoch: row.epoch === null || row.epoch === undefined ? null : Number(row.epoch),
    leaseUntil: readDate(row.lease_until),
    leased: Number(row.leased) === 1,
    backlog: Number(row.backlog),
  }));
}

/**
 * The nodes of an outbox that are not yet forgotten, by node id (the nodes table's primary key);
 * live: seen within `ttl` of the server's clock. With each, the partitions it holds a live lease
 * on (the lease table's primary-key range), sorted by the reader: `JSON_ARRAYAGG` takes no ORDER BY
 * on MySQL 8.
 */
export function nodes(table: QualifiedName, outbox: string, ttl: number): Statement<NodeRow[]> {
  const { nodes, leases } = tables(table);
  const p = Parameters.positional();
  return p.statement(
    `SELECT n.node_id, n.last_seen, n.last_seen > ${NOW_MS} - ${p.add(ttl)} AS live,
  (SELECT JSON_ARRAYAGG(l.${PARTITION}) FROM ${leases} l WHERE l.outbox = n.outbox AND l.owner = n.node_id AND l.lease_until >= ${NOW_MS}) AS partitions
FROM ${nodes} n WHERE n.outbox = ${p.add(outbox)} ORDER BY n.node_id`,
    (rows) =>
      rows.map((row) => ({
        nodeId: String(row.node_id),
        lastSeen: readDate(row.last_seen)!,
        live: Number(row.live) === 1,
        // Text on MariaDB; MySQL 8 returns a JSON column, which mysql2 parses.
        partitions: ((parseJsonColumn(row.partitions) ?? []) as unknown[]).map(Number).sort((a, b) => a - b),
      })),
  );
}
