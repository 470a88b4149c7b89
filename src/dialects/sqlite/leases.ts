import type {
  HeartbeatOptions,
  AcquireParams,
  Heartbeat,
  LeaseToken,
  NodeRow,
  PartitionRow,
} from '../../core/dialect.js';
import type { QualifiedName } from '../../core/identifiers.js';
import { batch, Status, unread, type Batch, type Row, type Statement } from '../../core/sql.js';
import { readDate } from '../shared/columns.js';
import { Parameters } from '../shared/parameters.js';
import { ownsLease } from './shared.js';
import { tables } from './tables.js';

/**
 * Leases on partitions and the heartbeats of relaying nodes. Times are Unix milliseconds from the
 * clock passed in; a lease whose `lease_until` has passed may be taken over.
 */

export function acquireLease(table: QualifiedName, params: AcquireParams): Statement<number | undefined> {
  const { leases } = tables(table);
  const { now } = params;
  const p = Parameters.positional();
  return p.statement(
    `INSERT INTO ${leases} (outbox, partition, owner, epoch, lease_until) VALUES (${p.add(params.outbox)}, ${p.add(params.partition)}, ${p.add(params.owner)}, 1, ${p.add(now + params.ttl)})
ON CONFLICT (outbox, partition) DO UPDATE
  SET owner = excluded.owner, epoch = epoch + 1, lease_until = excluded.lease_until
  WHERE lease_until < ${p.add(now)} OR owner = excluded.owner
RETURNING epoch`,
    (rows) => (rows[0] === undefined ? undefined : Number(rows[0].epoch)),
  );
}

export function renewLease(
  table: QualifiedName,
  lease: LeaseToken,
  ttl: number,
  now: number,
): Statement<boolean> {
  const p = Parameters.positional();
  return p.statement(
    `UPDATE ${tables(table).leases} SET lease_until = ${p.add(now + ttl)} WHERE ${ownsLease(p, lease)} RETURNING epoch`,
    (rows) => rows.length > 0,
  );
}

export function releaseLease(table: QualifiedName, lease: LeaseToken): Statement<void> {
  const p = Parameters.positional();
  return unread(
    p.query(
      `UPDATE ${tables(table).leases} SET lease_until = 0 WHERE ${ownsLease(p, lease)} RETURNING epoch`,
    ),
  );
}

/**
 * With `options`, also renews the node's leases of the outbox in the same transaction, one fenced
 * UPDATE each (SQLite runs them in-process: a statement costs no round trip). `checkDue` and the
 * upkeep are not reported (no `notify` on SQLite, no tallies).
 */
export function heartbeat(
  table: QualifiedName,
  outbox: string,
  nodeId: string,
  ttl: number,
  now: number,
  options?: HeartbeatOptions,
): Batch<Heartbeat> {
  const { nodes, leases } = tables(table);
  const seen = Parameters.positional();
  const forget = Parameters.positional();
  const look = Parameters.positional();
  const renew = [...(options?.renew ?? [])].sort((a, b) => a.partition - b.partition);
  return batch(
    [
      seen.query(
        `INSERT INTO ${nodes} (outbox, node_id, last_seen) VALUES (${seen.add(outbox)}, ${seen.add(nodeId)}, ${seen.add(now)}) ON CONFLICT (outbox, node_id) DO UPDATE SET last_seen = excluded.last_seen`,
      ),
      forget.query(
        `DELETE FROM ${nodes} WHERE outbox = ${forget.add(outbox)} AND last_seen < ${forget.add(now - 10 * ttl)}`,
      ),
      ...renew.map((lease) => renewLease(table, lease, ttl, now)),
      look.query(
        `SELECT (SELECT count(*) FROM ${nodes} WHERE outbox = ${look.add(outbox)} AND last_seen > ${look.add(now - ttl)}) AS live_nodes,
  coalesce((SELECT json_group_array(json_object('partition', partition, 'owner', owner, 'until', lease_until)) FROM ${leases} WHERE outbox = ${look.add(outbox)} AND lease_until >= ${look.add(now)}), '[]') AS leases`,
      ),
    ],
    (results) => {
      const row = results[results.length - 1]![0]!;
      return {
        liveNodes: Math.max(1, Number(row.live_nodes)),
        leases: JSON.parse(String(row.leases)) as Array<{ partition: number; owner: string; until: number }>,
        renewed: renew.filter((_, i) => (results[2 + i]?.length ?? 0) > 0).map((l) => l.partition),
        lost: renew.filter((_, i) => (results[2 + i]?.length ?? 0) === 0).map((l) => l.partition),
        due: [],
      };
    },
  );
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
 * tallies (a few rows each, see admin.ts `counts`), the leases are a primary-key range.
 */
export function partitions(
  table: QualifiedName,
  outbox: string,
  count: number,
  now: number,
): Statement<PartitionRow[]> {
  const { leases, tallies } = tables(table);
  const p = Parameters.positional();
  return p.statement(
    `WITH RECURSIVE series(partition) AS (SELECT 0 WHERE ${p.add(count)} > 0 UNION ALL SELECT partition + 1 FROM series WHERE partition + 1 < ${p.add(count)}),
backlog AS (SELECT partition, sum(n) AS backlog FROM ${tallies} WHERE outbox = ${p.add(outbox)} AND status < ${Status.dead} GROUP BY partition),
parts AS (SELECT partition FROM series UNION SELECT partition FROM backlog WHERE backlog <> 0 UNION SELECT partition FROM ${leases} WHERE outbox = ${p.add(outbox)})
SELECT parts.partition AS partition, l.owner AS owner, l.epoch AS epoch, l.lease_until AS lease_until, coalesce(l.lease_until >= ${p.add(now)}, 0) AS leased, coalesce(b.backlog, 0) AS backlog
FROM parts LEFT JOIN ${leases} l ON l.outbox = ${p.add(outbox)} AND l.partition = parts.partition LEFT JOIN backlog b ON b.partition = parts.partition
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
 * The nodes of an outbox that are not yet forgotten, by node id; live: seen within `ttl` of `now`.
 * With each, the partitions it holds a live lease on.
 */
export function nodes(table: QualifiedName, outbox: string, ttl: number, now: number): Statement<NodeRow[]> {
  const { nodes, leases } = tables(table);
  const p = Parameters.positional();
  return p.statement(
    `SELECT node_id, last_seen, last_seen > ${p.add(now - ttl)} AS live,
  (SELECT json_group_array(partition) FROM (SELECT l.partition AS partition FROM ${leases} l WHERE l.outbox = n.outbox AND l.owner = n.node_id AND l.lease_until >= ${p.add(now)} ORDER BY l.partition)) AS partitions
FROM ${nodes} n WHERE outbox = ${p.add(outbox)} ORDER BY node_id`,
    (rows) =>
      rows.map((row) => ({
        nodeId: String(row.node_id),
        lastSeen: readDate(row.last_seen)!,
        live: row.live === true || row.live === 1,
        partitions: (JSON.parse(String(row.partitions ?? '[]')) as unknown[]).map(Number),
      })),
  );
}
