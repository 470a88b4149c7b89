import type {
  AcquireParams,
  Heartbeat,
  HeartbeatOptions,
  LeaseToken,
  NodeRow,
  NotifyOnCommit,
  PartitionRow,
} from '../../core/dialect.js';
import type { QualifiedName } from '../../core/identifiers.js';
import {
  batch,
  statement,
  Status,
  type Batch,
  type Row,
  type SqlQuery,
  type Statement,
} from '../../core/sql.js';
import { readDate } from '../shared/columns.js';
import { Parameters } from '../shared/parameters.js';
import { addLease, MS, ownsLease } from './shared.js';
import { configTable, tables } from './tables.js';

/**
 * Leases and nodes: who relays which partition, and which nodes relay at all.
 *
 * Locking: a lease is a row of `<table>_leases` per outbox and partition. Acquiring, renewing and
 * releasing it update that row, so they wait for each other on its row lock; a worker's settle
 * renews it first, so a takeover waits until the settle's transaction ends, or the settle finds
 * the lease gone and writes nothing. Every write of a worker is fenced on the lease's owner and
 * epoch. Leases run from the moment they are written (`clock_timestamp()`), not from the
 * statement's start (`now()`): a statement that waited seconds for the lease row's lock (its holder
 * paused mid-settle) would otherwise grant a lease that has already expired, and a second node
 * would take the partition while the first starts delivering it. `countRewind` updates every lease
 * row of an outbox, first in its transaction, so it takes them before any message row, the order
 * a worker's settle takes them in. The two statements that write several lease rows (the
 * heartbeat's renewals and `countRewind`) lock them in partition order, so they cannot deadlock.
 * The CTEs added with them start with `_`: a CTE named like the user's message table (`held`)
 * would hide the table from the statement.
 */

/** The new lease's epoch, or `undefined` when another live owner holds the partition. */
export function acquireLease(table: QualifiedName, params: AcquireParams): Statement<number | undefined> {
  const { leases } = tables(table);
  const p = Parameters.numbered();
  const outbox = p.add(params.outbox);
  const partition = p.add(params.partition);
  const owner = p.add(params.owner);
  const ttl = p.add(params.ttl);
  return p.statement(
    `INSERT INTO ${leases} AS l (outbox, partition, owner, epoch, lease_until)
VALUES (${outbox}, ${partition}, ${owner}, 1, clock_timestamp() + ${ttl} ${MS})
ON CONFLICT (outbox, partition) DO UPDATE
  SET owner = EXCLUDED.owner, epoch = l.epoch + 1, lease_until = clock_timestamp() + ${ttl} ${MS}
  WHERE l.lease_until < now() OR l.owner = EXCLUDED.owner
RETURNING epoch`,
    (rows) => (rows[0] === undefined ? undefined : Number(rows[0].epoch)),
  );
}

/** {@link acquireLease} of several partitions in one statement, in partition order: those taken. */
export function acquireLeases(
  table: QualifiedName,
  params: Omit<AcquireParams, 'partition'> & { readonly partitions: readonly number[] },
): Statement<Array<{ partition: number; epoch: number }>> {
  const { leases } = tables(table);
  const p = Parameters.numbered();
  const outbox = p.add(params.outbox);
  const owner = p.add(params.owner);
  const ttl = p.add(params.ttl);
  const partitions = p.add([...params.partitions].sort((a, b) => a - b));
  return p.statement(
    `INSERT INTO ${leases} AS l (outbox, partition, owner, epoch, lease_until)
SELECT ${outbox}, w.partition, ${owner}, 1, clock_timestamp() + ${ttl} ${MS} FROM unnest(${partitions}::int[]) AS w(partition) ORDER BY w.partition
ON CONFLICT (outbox, partition) DO UPDATE
  SET owner = EXCLUDED.owner, epoch = l.epoch + 1, lease_until = clock_timestamp() + ${ttl} ${MS}
  WHERE l.lease_until < now() OR l.owner = EXCLUDED.owner
RETURNING partition, epoch`,
    (rows) => rows.map((row) => ({ partition: Number(row.partition), epoch: Number(row.epoch) })),
  );
}

/** The renewal, also the first statement of a settle: returns the lease row, none when lost. */
export function renewQuery(leases: string, lease: LeaseToken, ttl: number): SqlQuery {
  const p = Parameters.numbered();
  const owned = addLease(p, lease);
  return p.query(
    `UPDATE ${leases} SET lease_until = clock_timestamp() + ${p.add(ttl)} ${MS} WHERE ${ownsLease(owned)} RETURNING epoch`,
    true,
  );
}

/** False when the lease was lost. */
export function renewLease(table: QualifiedName, lease: LeaseToken, ttl: number): Statement<boolean> {
  return statement(renewQuery(tables(table).leases, lease, ttl), (rows) => rows.length > 0);
}

/** With `notify`, the notification goes out when a lease was released (see `notifyIf`). */
export function releaseLease(
  table: QualifiedName,
  lease: LeaseToken,
  notify?: NotifyOnCommit,
): Statement<void> {
  const { leases } = tables(table);
  const p = Parameters.numbered();
  const owned = addLease(p, lease);
  const release = `UPDATE ${leases} SET lease_until = '-infinity' WHERE ${ownsLease(owned)} RETURNING epoch`;
  if (notify === undefined) return p.statement(release, () => undefined);
  return p.statement(
    `WITH _released AS (${release}) SELECT ${notifyIf(p, notify, 'EXISTS (SELECT 1 FROM _released)')} AS notified`,
    () => undefined,
  );
}

/**
 * `pg_notify` when `condition` holds: delivered at commit, to every node's listener. Counted, so
 * the column is an integer: `pg_notify` returns `void`, which some drivers cannot read (Prisma
 * refuses the whole result).
 */
function notifyIf(p: Parameters, notify: NotifyOnCommit, condition: string): string {
  return `(SELECT count(CASE WHEN ${condition} THEN pg_notify(${p.add(notify.channel)}, ${p.add(notify.payload)}) END))::int`;
}

/**
 * Counts live relaying nodes (this one included) and returns the live leases, so the engine can
 * aim for its fair share of partitions. Nodes silent for ten lease periods are forgotten. With
 * `options`, the same statement renews the node's leases of the outbox (`held`: each row locked
 * in partition order and fenced on its owner and epoch; a row locked by a settle or a takeover is
 * skipped rather than waited for, so the heartbeat never queues behind a worker's transaction and
 * never takes a second connection for a partition), tells which are no longer the node's (`lost`,
 * on the statement's snapshot), reports which of them have a message due (two probes a partition:
 * the `_ready` index, the `_retry` index up to now), and whether the tallies' upkeep has work: the
 * tally rows of the outbox (a few after a compaction) and its `<table>_config` row. An idle node
 * sends this one statement per outbox and tick, whatever its partition count.
 */
export function heartbeat(
  table: QualifiedName,
  outbox: string,
  nodeId: string,
  ttl: number,
  _now?: number,
  options?: HeartbeatOptions,
): Batch<Heartbeat> {
  const { messages, nodes, leases, tallies } = tables(table);
  const p = Parameters.numbered();
  const o = p.add(outbox);
  const node = p.add(nodeId);
  const period = p.add(ttl);
  const renew = options?.renew ?? [];
  const held =
    options === undefined
      ? ''
      : `, _held AS (
  SELECT l.partition FROM ${leases} l JOIN unnest(${p.add(renew.map((l) => l.partition))}::int[], ${p.add(renew.map((l) => l.epoch))}::bigint[]) AS h(partition, epoch)
    ON l.partition = h.partition AND l.epoch = h.epoch
  WHERE l.outbox = ${o} AND l.owner = ${node} ORDER BY l.partition FOR UPDATE OF l SKIP LOCKED
), _renewed AS (
  UPDATE ${leases} l SET lease_until = clock_timestamp() + ${period} ${MS} FROM _held
  WHERE l.outbox = ${o} AND l.partition = _held.partition RETURNING l.partition
)`;
  const tokens = () =>
    `unnest(${p.add(renew.map((l) => l.partition))}::int[], ${p.add(renew.map((l) => l.epoch))}::bigint[]) AS t(partition, epoch)`;
  const due = (partition: string) =>
    `EXISTS (SELECT 1 FROM ${messages} m WHERE m.outbox = ${o} AND m.partition = ${partition} AND m.status = ${Status.ready})
    OR EXISTS (SELECT 1 FROM ${messages} m WHERE m.outbox = ${o} AND m.partition = ${partition} AND m.status = ${Status.retry} AND m.next_attempt_at <= now())`;
  const extra =
    options === undefined
      ? ''
      : `,
  coalesce((SELECT json_agg(partition) FROM _renewed), '[]'::json)::text AS renewed,
  coalesce((SELECT json_agg(t.partition) FROM ${tokens()} WHERE NOT EXISTS (SELECT 1 FROM ${leases} l WHERE l.outbox = ${o} AND l.partition = t.partition AND l.owner = ${node} AND l.epoch = t.epoch)), '[]'::json)::text AS lost,
  ${options.checkDue ? `coalesce((SELECT json_agg(r.partition) FROM _renewed r WHERE ${due('r.partition')}), '[]'::json)::text` : `'[]'`} AS due,
  (SELECT count(*) > count(DISTINCT partition) FROM ${tallies} WHERE outbox = ${o}) AS compact_due,
  coalesce((SELECT recounted_at < now() - ${p.add(options.recountEvery)} ${MS} FROM ${configTable(table)} WHERE outbox = ${o}), false) AS recount_due${
    options.notify === undefined
      ? ''
      : `,
  ${notifyIf(p, options.notify, 'true')} AS notified`
  }`;
  const beat = p.query(
    `WITH beat AS (
  INSERT INTO ${nodes} (outbox, node_id, last_seen) VALUES (${o}, ${node}, now())
  ON CONFLICT (outbox, node_id) DO UPDATE SET last_seen = now() RETURNING 1
), forgotten AS (
  DELETE FROM ${nodes} WHERE outbox = ${o} AND last_seen < now() - 10 * ${period} ${MS} RETURNING 1
)${held}
SELECT (SELECT 1 + count(*) FROM ${nodes} WHERE outbox = ${o} AND node_id <> ${node} AND last_seen > now() - ${period} ${MS})::int AS live_nodes,
  (SELECT count(*) FROM beat)::int AS beat,
  (SELECT count(*) FROM forgotten)::int AS forgotten,
  coalesce((SELECT json_agg(json_build_object('partition', partition, 'owner', owner, 'until', (extract(epoch FROM lease_until) * 1000)::bigint)) FROM ${leases} WHERE outbox = ${o} AND lease_until >= now()), '[]'::json)::text AS leases${extra}`,
  );
  return batch([beat], (results) => readHeartbeat(results[results.length - 1]![0]!));
}

/** The row of `heartbeat` (`live_nodes`, `leases`; with options `renewed`, `due`, `compact_due`, `recount_due`). */
function readHeartbeat(row: Row): Heartbeat {
  const live = JSON.parse(String(row.leases)) as Array<{
    partition: unknown;
    owner: unknown;
    until: unknown;
  }>;
  const partitions = (column: unknown): number[] =>
    column === undefined ? [] : (JSON.parse(String(column)) as unknown[]).map(Number);
  return {
    liveNodes: Math.max(1, Number(row.live_nodes)),
    leases: live.map((l) => ({
      partition: Number(l.partition),
      owner: String(l.owner),
      until: Number(l.until),
    })),
    renewed: partitions(row.renewed),
    lost: partitions(row.lost),
    due: partitions(row.due),
    upkeep:
      row.compact_due === undefined
        ? undefined
        : { compact: row.compact_due === true, recount: row.recount_due === true },
  };
}

/**
 * A stopping node, in one statement: hands back its leases of the outbox (locked in partition
 * order, each fenced on owner and epoch), is forgotten, and with `notify` tells the others.
 */
export function leave(
  table: QualifiedName,
  outbox: string,
  nodeId: string,
  held: readonly LeaseToken[],
  notify: NotifyOnCommit | undefined,
): Statement<void> {
  const { leases, nodes } = tables(table);
  const p = Parameters.numbered();
  const o = p.add(outbox);
  const node = p.add(nodeId);
  return p.statement(
    `WITH _held AS (
  SELECT l.partition FROM ${leases} l JOIN unnest(${p.add(held.map((l) => l.partition))}::int[], ${p.add(held.map((l) => l.epoch))}::bigint[]) AS h(partition, epoch)
    ON l.partition = h.partition AND l.epoch = h.epoch
  WHERE l.outbox = ${o} AND l.owner = ${node} ORDER BY l.partition FOR UPDATE OF l
), _released AS (
  UPDATE ${leases} l SET lease_until = '-infinity' FROM _held WHERE l.outbox = ${o} AND l.partition = _held.partition RETURNING 1
), _removed AS (
  DELETE FROM ${nodes} WHERE outbox = ${o} AND node_id = ${node} RETURNING 1
) SELECT (SELECT count(*) FROM _released)::int AS released, (SELECT count(*) FROM _removed)::int AS removed${
      notify === undefined ? '' : `, ${notifyIf(p, notify, 'true')} AS notified`
    }`,
    () => undefined,
  );
}

/** With `notify`, tells the other nodes when the removal commits: they rebalance at once. */
export function removeNode(
  table: QualifiedName,
  outbox: string,
  nodeId: string,
  notify?: NotifyOnCommit,
): Statement<void> {
  const { nodes } = tables(table);
  const p = Parameters.numbered();
  const remove = `DELETE FROM ${nodes} WHERE outbox = ${p.add(outbox)} AND node_id = ${p.add(nodeId)}`;
  if (notify === undefined) return p.statement(remove, () => undefined);
  return p.statement(
    `WITH _removed AS (${remove} RETURNING 1) SELECT (SELECT count(*) FROM _removed)::int AS removed, ${notifyIf(p, notify, 'true')} AS notified`,
    () => undefined,
  );
}

/**
 * A rewind on every lease row of an outbox (see `PollParams.rewindsSeen`), run first in the
 * transaction that makes messages ready below the workers' cursors.
 */
export function countRewind(table: QualifiedName, outbox: string): Statement<void> {
  const p = Parameters.numbered();
  const { leases } = tables(table);
  const o = p.add(outbox);
  // Locked in partition order first, as the heartbeat's renewals lock them: no deadlock between the two.
  return p.statement(
    `UPDATE ${leases} l SET rewinds = l.rewinds + 1 FROM (SELECT partition FROM ${leases} WHERE outbox = ${o} ORDER BY partition FOR UPDATE) locked
WHERE l.outbox = ${o} AND l.partition = locked.partition`,
    () => undefined,
  );
}

/**
 * Each partition's lease row and backlog, for `partitions()`: the backlog sums the partition's
 * tallies (a few rows each, see admin.ts `counts`), the leases are a primary-key range. Reads only,
 * takes no lock. A released lease (`-infinity`) reads as no expiry.
 */
export function partitions(table: QualifiedName, outbox: string, count: number): Statement<PartitionRow[]> {
  const { leases, tallies } = tables(table);
  const p = Parameters.numbered();
  const o = p.add(outbox);
  return p.statement(
    `WITH backlog AS (SELECT partition, sum(pending) AS backlog FROM ${tallies} WHERE outbox = ${o} GROUP BY partition),
parts AS (SELECT generate_series(0, ${p.add(count)}::int - 1) AS partition UNION SELECT partition FROM backlog WHERE backlog <> 0 UNION SELECT partition FROM ${leases} WHERE outbox = ${o})
SELECT parts.partition, l.owner, l.epoch,
  CASE WHEN isfinite(l.lease_until) THEN (extract(epoch FROM l.lease_until) * 1000)::float8 END AS lease_until,
  coalesce(l.lease_until >= now(), false) AS leased, coalesce(b.backlog, 0) AS backlog
FROM parts LEFT JOIN ${leases} l ON l.outbox = ${o} AND l.partition = parts.partition LEFT JOIN backlog b ON b.partition = parts.partition
ORDER BY parts.partition`,
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
    leased: row.leased === true || row.leased === 1,
    backlog: Number(row.backlog),
  }));
}

/**
 * The nodes of an outbox that are not yet forgotten, by node id; live: seen within `ttl`. With
 * each, the partitions it holds a live lease on (the lease table's primary-key range).
 */
export function nodes(table: QualifiedName, outbox: string, ttl: number): Statement<NodeRow[]> {
  const { nodes, leases } = tables(table);
  const p = Parameters.numbered();
  return p.statement(
    `SELECT node_id, (extract(epoch FROM last_seen) * 1000)::float8 AS last_seen, last_seen > now() - ${p.add(ttl)} ${MS} AS live,
  coalesce((SELECT json_agg(l.partition ORDER BY l.partition) FROM ${leases} l WHERE l.outbox = n.outbox AND l.owner = n.node_id AND l.lease_until >= now()), '[]'::json)::text AS partitions
FROM ${nodes} n WHERE outbox = ${p.add(outbox)} ORDER BY node_id`,
    readNodes,
  );
}

/** The rows of `nodes` (`node_id`, `last_seen`, `live`, `partitions` as JSON text). */
function readNodes(rows: readonly Row[]): NodeRow[] {
  return rows.map((row) => ({
    nodeId: String(row.node_id),
    lastSeen: readDate(row.last_seen)!,
    live: row.live === true || row.live === 1,
    partitions: (JSON.parse(String(row.partitions)) as unknown[]).map(Number),
  }));
}
