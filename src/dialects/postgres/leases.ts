import type { AcquireParams, Heartbeat, LeaseToken } from '../../core/dialect.js';
import type { QualifiedName } from '../../core/identifiers.js';
import { batch, statement, type Batch, type SqlQuery, type Statement } from '../../core/sql.js';
import { Parameters } from '../shared/parameters.js';
import { addLease, MS, ownsLease } from './shared.js';
import { tables } from './tables.js';

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
 * a worker's settle takes them in.
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

export function releaseLease(table: QualifiedName, lease: LeaseToken): Statement<void> {
  const { leases } = tables(table);
  const p = Parameters.numbered();
  const owned = addLease(p, lease);
  return p.statement(
    `UPDATE ${leases} SET lease_until = '-infinity' WHERE ${ownsLease(owned)} RETURNING epoch`,
    () => undefined,
  );
}

/**
 * Counts live relaying nodes (this one included) and returns the live leases, so the engine can
 * aim for its fair share of partitions. Nodes silent for ten lease periods are forgotten.
 */
export function heartbeat(
  table: QualifiedName,
  outbox: string,
  nodeId: string,
  ttl: number,
): Batch<Heartbeat> {
  const { nodes, leases } = tables(table);
  const p = Parameters.numbered();
  const o = p.add(outbox);
  const node = p.add(nodeId);
  const period = p.add(ttl);
  const beat = p.query(
    `WITH beat AS (
  INSERT INTO ${nodes} (outbox, node_id, last_seen) VALUES (${o}, ${node}, now())
  ON CONFLICT (outbox, node_id) DO UPDATE SET last_seen = now() RETURNING 1
), forgotten AS (
  DELETE FROM ${nodes} WHERE outbox = ${o} AND last_seen < now() - 10 * ${period} ${MS} RETURNING 1
)
SELECT (SELECT 1 + count(*) FROM ${nodes} WHERE outbox = ${o} AND node_id <> ${node} AND last_seen > now() - ${period} ${MS})::int AS live_nodes,
  (SELECT count(*) FROM beat)::int AS beat,
  (SELECT count(*) FROM forgotten)::int AS forgotten,
  coalesce((SELECT json_agg(json_build_object('partition', partition, 'owner', owner, 'until', (extract(epoch FROM lease_until) * 1000)::bigint)) FROM ${leases} WHERE outbox = ${o} AND lease_until >= now()), '[]'::json)::text AS leases`,
  );
  return batch([beat], (results) => {
    const row = results[results.length - 1]![0]!;
    const live = JSON.parse(String(row.leases)) as Array<{
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
    };
  });
}

export function removeNode(table: QualifiedName, outbox: string, nodeId: string): Statement<void> {
  const { nodes } = tables(table);
  const p = Parameters.numbered();
  return p.statement(
    `DELETE FROM ${nodes} WHERE outbox = ${p.add(outbox)} AND node_id = ${p.add(nodeId)}`,
    () => undefined,
  );
}

/**
 * A rewind on every lease row of an outbox (see `PollParams.rewindsSeen`), run first in the
 * transaction that makes messages ready below the workers' cursors.
 */
export function countRewind(table: QualifiedName, outbox: string): Statement<void> {
  const p = Parameters.numbered();
  return p.statement(
    `UPDATE ${tables(table).leases} SET rewinds = rewinds + 1 WHERE outbox = ${p.add(outbox)}`,
    () => undefined,
  );
}
