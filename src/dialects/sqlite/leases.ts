import type { AcquireParams, Heartbeat, LeaseToken } from '../../core/dialect.js';
import type { QualifiedName } from '../../core/identifiers.js';
import { batch, unread, type Batch, type Statement } from '../../core/sql.js';
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

export function heartbeat(
  table: QualifiedName,
  outbox: string,
  nodeId: string,
  ttl: number,
  now: number,
): Batch<Heartbeat> {
  const { nodes, leases } = tables(table);
  const seen = Parameters.positional();
  const forget = Parameters.positional();
  const look = Parameters.positional();
  return batch(
    [
      seen.query(
        `INSERT INTO ${nodes} (outbox, node_id, last_seen) VALUES (${seen.add(outbox)}, ${seen.add(nodeId)}, ${seen.add(now)}) ON CONFLICT (outbox, node_id) DO UPDATE SET last_seen = excluded.last_seen`,
      ),
      forget.query(
        `DELETE FROM ${nodes} WHERE outbox = ${forget.add(outbox)} AND last_seen < ${forget.add(now - 10 * ttl)}`,
      ),
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
