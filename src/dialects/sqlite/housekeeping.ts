import type { NextRetry } from '../../core/dialect.js';
import type { QualifiedName } from '../../core/identifiers.js';
import { batch, Status, type Batch, type Statement } from '../../core/sql.js';
import { Parameters } from '../shared/parameters.js';
import { tables } from './tables.js';

/** Housekeeping: pruning delivered rows, and how long an idle worker may sleep. */

/**
 * Deletes one batch of delivered rows older than the retention window, oldest first (a range of
 * the index on (outbox, delivered_at) WHERE status = delivered); how many.
 */
export function prune(
  table: QualifiedName,
  outbox: string,
  olderThanSeconds: number,
  limit: number,
  now: number,
): Batch<number> {
  const { messages } = tables(table);
  const p = Parameters.positional();
  return batch(
    [
      p.query(
        `DELETE FROM ${messages} WHERE id IN (SELECT id FROM ${messages} WHERE outbox = ${p.add(outbox)} AND status = ${Status.delivered} AND delivered_at < ${p.add(now - olderThanSeconds * 1000)} ORDER BY delivered_at LIMIT ${p.add(limit)})`,
      ),
      // How many the DELETE removed: it returns no rows of its own.
      Parameters.positional().query(`SELECT changes() AS pruned`),
    ],
    (results) => Number(results[results.length - 1]![0]?.pruned ?? 0),
  );
}

/**
 * The earliest retry time of a partition. The statement reads no clock: `now` is what its row says
 * (`NaN` here, since it selects none), and the engine measures `at` against its own clock then.
 */
export function nextRetryAt(table: QualifiedName, outbox: string, partition: number): Statement<NextRetry> {
  const p = Parameters.positional();
  return p.statement(
    `SELECT min(next_attempt_at) AS next_attempt_at FROM ${tables(table).messages} WHERE outbox = ${p.add(outbox)} AND partition = ${p.add(partition)} AND status = ${Status.retry}`,
    (rows) => {
      const at = rows[0]?.next_attempt_at;
      return {
        at: at === null || at === undefined ? null : Number(at),
        now: Number(rows[0]?.now ?? NaN),
      };
    },
  );
}
