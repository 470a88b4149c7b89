import type { NextRetry, TallyDrift } from '../../core/dialect.js';
import { companion, quoteName, type QualifiedName } from '../../core/identifiers.js';
import { batch, Status, type Batch, type Statement } from '../../core/sql.js';
import { nextRetryOf } from '../shared/columns.js';
import { Parameters } from '../shared/parameters.js';
import { figures } from './postgres-schema.js';
import { MS } from './shared.js';
import { configTable, tables } from './tables.js';

/**
 * Housekeeping: pruning delivered rows, the upkeep of the tallies `counts()` sums, and how long an
 * idle worker may sleep.
 *
 * Locking: prune deletes by physical position, so a row updated meanwhile has moved, no longer
 * matches, and stays. Compacting deletes the tallies it sums, so two compactions at once move
 * each row once: the second waits for the first's row locks and skips the rows it deleted. A
 * recount claims the outbox's `<table>_config` row, which no worker waits for.
 */

/**
 * Deletes one batch of delivered rows older than the retention window; how many. Reads the range
 * of the index (outbox, delivered_at) WHERE status = delivered that is older than the window,
 * oldest first, and nothing else; dead messages are never pruned.
 *
 * The batch is `<table>_prune()` (postgres-schema.ts), which deletes by physical position
 * (`ctid = ANY(ARRAY(…))`, a TID scan: one heap visit a row, where deleting by `id` added a
 * primary-key lookup and `IN (SELECT …)` became a hash join over the table) and tallies the
 * statement's row count, exact whatever else deletes meanwhile. A row updated meanwhile has moved,
 * no longer matches, and stays.
 */
export function prune(
  table: QualifiedName,
  outbox: string,
  olderThanSeconds: number,
  limit: number,
  _now?: number,
): Batch<number> {
  const p = Parameters.numbered();
  const pruned = p.query(
    `SELECT ${quoteName(companion(table, 'prune'))}(${p.add(outbox)}, ${p.add(olderThanSeconds)}, ${p.add(limit)}) AS pruned`,
  );
  return batch([pruned], (results) => Number(results[results.length - 1]![0]?.pruned ?? 0));
}

/**
 * Sums each partition's tallies into one row, so `counts()` reads a few rows. Run by the node
 * holding partition 0 at every coordination tick. Two at once still move each row once: the
 * second waits for the first's row locks and skips the rows it deleted.
 */
export function compactTallies(table: QualifiedName, outbox: string): Statement<void> {
  const { tallies } = tables(table);
  const p = Parameters.numbered();
  const o = p.add(outbox);
  return p.statement(
    `WITH gathered AS (
  DELETE FROM ${tallies} WHERE outbox = ${o} AND partition IN (SELECT partition FROM ${tallies} WHERE outbox = ${o} GROUP BY partition HAVING count(*) > 1)
  RETURNING partition, pending, dead, delivered
), summed AS (
  INSERT INTO ${tallies} (outbox, partition, pending, dead, delivered)
  SELECT ${o}, partition, sum(pending), sum(dead), sum(delivered) FROM gathered GROUP BY partition
  HAVING sum(pending) <> 0 OR sum(dead) <> 0 OR sum(delivered) <> 0 RETURNING 1
) SELECT (SELECT count(*) FROM gathered)::int AS gathered`,
    () => undefined,
  );
}

/**
 * When the outbox's last recount is `everyMs` old (or its `<table>_config` row, written when its
 * first relay started: `migrate()` created the tallies from the rows), compares the tallies with
 * the rows on one snapshot and adds the difference as a tally: what changed the rows without
 * tallying (SQL run by hand, a node of a version before tallies). Reads every row of the outbox.
 * Pending and dead are compared per partition, delivered per outbox: prune tallies the rows it
 * deletes on partition 0, whichever partitions they were delivered in.
 *
 * Claimed on the outbox's `<table>_config` row, whose `recounted_at` it moves only if the row
 * still holds the value this statement's snapshot saw: a concurrent recount that committed in
 * between makes the claim find nothing (Postgres re-checks the updated row), so two recounts never
 * add the same difference (under REPEATABLE READ the second fails instead). No worker waits for it.
 * Returns the difference, or no row when not due or claimed by another.
 */
export function recount(
  table: QualifiedName,
  outbox: string,
  everyMs: number,
): Statement<TallyDrift | undefined> {
  const { messages, tallies } = tables(table);
  const config = configTable(table);
  const p = Parameters.numbered();
  const o = p.add(outbox);
  const every = p.add(everyMs);
  return p.statement(
    `WITH claim AS (
  UPDATE ${config} SET recounted_at = clock_timestamp()
  WHERE outbox = ${o} AND recounted_at = (SELECT recounted_at FROM ${config} WHERE outbox = ${o})
    AND recounted_at < now() - ${every} ${MS}
  RETURNING 1
), actual AS (
  SELECT partition, ${figures('', true)} FROM ${messages} WHERE outbox = ${o} GROUP BY partition
), tallied AS (
  SELECT partition, sum(pending) AS pending, sum(dead) AS dead, sum(delivered) AS delivered FROM ${tallies} WHERE outbox = ${o} GROUP BY partition
), drift AS (
  SELECT partition, coalesce(a.pending, 0) - coalesce(t.pending, 0) AS pending, coalesce(a.dead, 0) - coalesce(t.dead, 0) AS dead, 0 AS delivered
  FROM actual a FULL JOIN tallied t USING (partition)
  UNION ALL
  SELECT 0, 0, 0, (SELECT coalesce(sum(delivered), 0) FROM actual) - (SELECT coalesce(sum(delivered), 0) FROM tallied)
), corrected AS (
  INSERT INTO ${tallies} (outbox, partition, pending, dead, delivered)
  SELECT ${o}, partition, pending, dead, delivered FROM drift
  WHERE EXISTS (SELECT 1 FROM claim) AND (pending <> 0 OR dead <> 0 OR delivered <> 0) RETURNING pending, dead, delivered
) SELECT coalesce(sum(pending), 0) AS pending, coalesce(sum(dead), 0) AS dead, coalesce(sum(delivered), 0) AS delivered
FROM corrected HAVING EXISTS (SELECT 1 FROM claim)`,
    (rows) => {
      const row = rows[0];
      if (row === undefined) return undefined;
      return { pending: Number(row.pending), dead: Number(row.dead), delivered: Number(row.delivered) };
    },
  );
}

/**
 * The earliest retry time of a partition, and the database's clock to measure it against, so an
 * idle worker sleeps no longer than needed.
 */
export function nextRetryAt(table: QualifiedName, outbox: string, partition: number): Statement<NextRetry> {
  const { messages } = tables(table);
  const p = Parameters.numbered();
  return p.statement(
    `SELECT min(next_attempt_at) AS next_attempt_at, now() AS now FROM ${messages} WHERE outbox = ${p.add(outbox)} AND partition = ${p.add(partition)} AND status = ${Status.retry}`,
    (rows) => nextRetryOf(rows[0]?.next_attempt_at, rows[0]?.now),
    true,
  );
}
