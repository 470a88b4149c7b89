import type { NextRetry, TallyDrift } from '../../core/dialect.js';
import type { QualifiedName } from '../../core/identifiers.js';
import { batch, Status, type Batch, type Statement } from '../../core/sql.js';
import { parseJsonColumn } from '../shared/columns.js';
import { Parameters } from '../shared/parameters.js';
import { byIds, figures, NOW_MS, PARTITION, TALLY_COLUMNS } from './shared.js';
import { configTable, tables } from './tables.js';

/**
 * Housekeeping: pruning delivered rows, the upkeep of the tallies `counts()` sums, and how long an
 * idle worker may sleep.
 *
 * Locking: each is one transaction whose first statement locks the rows it will change and keeps
 * their ids in a session variable (`SET @v = (SELECT JSON_ARRAYAGG(id) … FOR UPDATE)`): the
 * statements after it read and change exactly those rows, which no one else can change meanwhile.
 * A second pruner or compactor waits for the first's locks, then finds the rows gone. A recount
 * claims the outbox's `<table>_config` row, which no worker waits for.
 */

/**
 * Deletes one batch of delivered rows older than the retention window, oldest first, with their
 * tally; how many. Reads the range of `_delivered_at` (outbox, status, delivered_at) older than
 * the window, and nothing else; dead messages are never pruned.
 */
export function prune(
  table: QualifiedName,
  outbox: string,
  olderThanSeconds: number,
  limit: number,
): Batch<number> {
  const { messages, tallies } = tables(table);
  const lock = Parameters.positional();
  const tally = Parameters.positional();
  return batch(
    [
      lock.query(
        `SET @outboxer_pruned = (SELECT JSON_ARRAYAGG(id) FROM (SELECT id FROM ${messages} WHERE outbox = ${lock.add(outbox)} AND status = ${Status.delivered} AND delivered_at < ${NOW_MS} - ${lock.add(olderThanSeconds * 1000)} ORDER BY delivered_at LIMIT ${lock.add(limit)} FOR UPDATE) AS pruned)`,
      ),
      tally.query(
        `INSERT INTO ${tallies} ${TALLY_COLUMNS} SELECT ${tally.add(outbox)}, m.${PARTITION}, 0, 0, -COUNT(*) FROM ${byIds('@outboxer_pruned', messages, 'm')} GROUP BY m.${PARTITION}`,
      ),
      { text: `DELETE m FROM ${byIds('@outboxer_pruned', messages, 'm')}`, values: [] },
      { text: `SELECT ROW_COUNT() AS pruned`, values: [] },
    ],
    (results) => Number(results[results.length - 1]![0]?.pruned ?? 0),
  );
}

/**
 * Sums each partition's tallies into one row, so `counts()` reads a few rows. Run by the node
 * holding partition 0 at every coordination tick. Locks the outbox's tally rows as they are
 * (reading `_tallies_outbox` (outbox, id); a tally still uncommitted is waited for, so none is
 * half-counted), inserts their sums, deletes them. The relay's transactions run at READ COMMITTED
 * (see the mysql2 adapter): no gap is locked, so publishers keep inserting tallies meanwhile.
 */
export function compactTallies(table: QualifiedName, outbox: string): Batch<void> {
  const { tallies } = tables(table);
  const lock = Parameters.positional();
  const sum = Parameters.positional();
  return batch(
    [
      lock.query(
        `SET @outboxer_tallies = (SELECT JSON_ARRAYAGG(id) FROM (SELECT id FROM ${tallies} WHERE outbox = ${lock.add(outbox)} FOR UPDATE) AS counted)`,
      ),
      sum.query(
        `INSERT INTO ${tallies} ${TALLY_COLUMNS} SELECT ${sum.add(outbox)}, t.${PARTITION}, SUM(t.pending), SUM(t.dead), SUM(t.delivered) FROM ${byIds('@outboxer_tallies', tallies, 't')}
GROUP BY t.${PARTITION} HAVING SUM(t.pending) <> 0 OR SUM(t.dead) <> 0 OR SUM(t.delivered) <> 0`,
      ),
      { text: `DELETE t FROM ${byIds('@outboxer_tallies', tallies, 't')}`, values: [] },
    ],
    () => undefined,
  );
}

/**
 * When the outbox's last recount is `everyMs` old, compares the tallies with the rows on one read
 * view and adds the difference as a tally: what changed the rows without tallying (SQL run by
 * hand, a TRUNCATE). Reads every row of the outbox. Claimed on the outbox's `<table>_config` row:
 * the UPDATE locks it, so a second recount waits and then finds it not due. The difference is
 * read by a plain SELECT (a consistent read of both tables at once), kept as JSON in a session
 * variable, and inserted from it. Returns the difference, or `undefined` when not due.
 */
export function recount(
  table: QualifiedName,
  outbox: string,
  everyMs: number,
): Batch<TallyDrift | undefined> {
  const { messages, tallies } = tables(table);
  const claim = Parameters.positional();
  const measure = Parameters.positional();
  const correct = Parameters.positional();
  const drift = `SELECT ${PARTITION}, SUM(pending) AS pending, SUM(dead) AS dead, SUM(delivered) AS delivered FROM (
    SELECT ${PARTITION}, ${figures()} FROM ${messages} WHERE outbox = ${measure.add(outbox)} GROUP BY ${PARTITION}
    UNION ALL
    SELECT ${PARTITION}, -SUM(pending), -SUM(dead), -SUM(delivered) FROM ${tallies} WHERE outbox = ${measure.add(outbox)} GROUP BY ${PARTITION}
  ) AS both_sides GROUP BY ${PARTITION} HAVING SUM(pending) <> 0 OR SUM(dead) <> 0 OR SUM(delivered) <> 0`;
  return batch(
    [
      claim.query(
        `UPDATE ${configTable(table)} SET recounted_at = ${NOW_MS} WHERE outbox = ${claim.add(outbox)} AND recounted_at < ${NOW_MS} - ${claim.add(everyMs)}`,
      ),
      { text: `SET @outboxer_claimed = ROW_COUNT()`, values: [] },
      measure.query(
        `SET @outboxer_drift = IF(@outboxer_claimed > 0, (SELECT JSON_ARRAYAGG(JSON_OBJECT('p', ${PARTITION}, 'pending', pending, 'dead', dead, 'delivered', delivered)) FROM (${drift}) AS d), NULL)`,
      ),
      correct.query(
        `INSERT INTO ${tallies} ${TALLY_COLUMNS} SELECT ${correct.add(outbox)}, j.p, j.pending, j.dead, j.delivered
FROM JSON_TABLE(@outboxer_drift, '$[*]' COLUMNS (p INT PATH '$.p', pending BIGINT PATH '$.pending', dead BIGINT PATH '$.dead', delivered BIGINT PATH '$.delivered')) AS j`,
      ),
      { text: `SELECT @outboxer_claimed AS claimed, @outboxer_drift AS drift`, values: [] },
    ],
    (results) => {
      const row = results[results.length - 1]![0];
      if (row === undefined || !(Number(row.claimed) > 0)) return undefined;
      const corrections = (parseJsonColumn(row.drift) ?? []) as Array<Record<string, unknown>>;
      const total = (key: string) => corrections.reduce((sum, c) => sum + Number(c[key]), 0);
      return { pending: total('pending'), dead: total('dead'), delivered: total('delivered') };
    },
  );
}

/**
 * The earliest retry time of a partition, and the server's clock to measure it against, so an
 * idle worker sleeps no longer than needed. One probe of `_retry` (outbox, partition, status,
 * next_attempt_at).
 */
export function nextRetryAt(table: QualifiedName, outbox: string, partition: number): Statement<NextRetry> {
  const p = Parameters.positional();
  return p.statement(
    `SELECT MIN(next_attempt_at) AS next_attempt_at, ${NOW_MS} AS now FROM ${tables(table).messages} WHERE outbox = ${p.add(outbox)} AND ${PARTITION} = ${p.add(partition)} AND status = ${Status.retry}`,
    (rows) => {
      const row = rows[0];
      const next = row?.next_attempt_at;
      return {
        at: next === null || next === undefined ? null : Number(next),
        now: row?.now === undefined || row.now === null ? Date.now() : Number(row.now),
      };
    },
    true,
  );
}
