import type { PollParams, PollResult } from '../../core/dialect.js';
import type { QualifiedName } from '../../core/identifiers.js';
import { Status, type Row, type Statement } from '../../core/sql.js';
import { polledMessages } from '../shared/columns.js';
import { Parameters } from '../shared/parameters.js';
import { blockingStatus } from '../shared/statuses.js';
import { blocking, COLUMNS, M_COLUMNS } from './shared.js';
import { tables } from './tables.js';

/** Retries due before this, Unix milliseconds: `null` is the clock passed in. */
function dueMillis(params: PollParams): number {
  if (params.dueBefore === 'infinity') return Number.MAX_SAFE_INTEGER;
  return params.dueBefore === null ? params.now : params.dueBefore.getTime();
}

export function poll(table: QualifiedName, params: PollParams): Statement<PollResult> {
  const { messages } = tables(table);
  const { lease } = params;
  const p = Parameters.positional();
  const due = dueMillis(params);
  // SQLite keeps no cursor (every poll starts from the beginning) and has no publishers to watch.
  const read = (rows: readonly Row[]): PollResult => ({
    messages: polledMessages(rows, lease.outbox),
    start: undefined,
    publishersQuiet: false,
  });
  if (params.ordering === 'total') {
    // Its head decides alone: a ready-only poll has nothing to save.
    return p.statement(
      `WITH head AS (
  SELECT id, next_attempt_at FROM ${messages} WHERE outbox = ${p.add(lease.outbox)} AND partition = ${p.add(lease.partition)} AND status ${blocking(params.parkDead)} ORDER BY id LIMIT 1
)
SELECT * FROM (
  SELECT ${COLUMNS}, 0 AS blocked FROM ${messages} WHERE id = (SELECT id FROM head WHERE next_attempt_at <= ${p.add(due)})
  UNION ALL
  SELECT * FROM (SELECT ${COLUMNS}, 0 AS blocked FROM ${messages}
    WHERE NOT EXISTS (SELECT 1 FROM head) AND outbox = ${p.add(lease.outbox)} AND partition = ${p.add(lease.partition)} AND status = ${Status.ready} AND id > ${p.add(params.afterId)}
    ORDER BY id LIMIT ${p.add(params.limit)})
) ORDER BY id`,
      read,
    );
  }
  if (params.readyOnly === true) return readyOnlyPoll(table, params, read);
  const blocked =
    params.ordering === 'group'
      ? `(m.group_key IS NOT NULL AND EXISTS (SELECT 1 FROM ${messages} h WHERE h.outbox = m.outbox AND h.group_key = m.group_key AND ${blockingStatus(params.parkDead, 'h.status')}))`
      : '0';
  // Retries due, then ready rows. Unsorted, as on Postgres: the engine orders the rows by id, and a
  // sort of the union here costs SQLite two temporary B-trees a poll (nearly a tenth of its time).
  return p.statement(
    `SELECT * FROM (SELECT ${COLUMNS}, 0 AS blocked FROM ${messages}
    WHERE outbox = ${p.add(lease.outbox)} AND partition = ${p.add(lease.partition)} AND status = ${Status.retry} AND next_attempt_at <= ${p.add(due)}
    ORDER BY next_attempt_at LIMIT ${p.add(params.limit)}) UNION ALL SELECT * FROM (SELECT ${M_COLUMNS}, ${blocked} AS blocked FROM ${messages} m
    WHERE m.outbox = ${p.add(lease.outbox)} AND m.partition = ${p.add(lease.partition)} AND m.status = ${Status.ready} AND m.id > ${p.add(params.afterId)}
    ORDER BY m.id LIMIT ${p.add(params.limit)})`,
    read,
  );
}

/**
 * The ready rows alone, when the outbox's tallies say, on the poll's own snapshot, that neither
 * branch of the full poll has anything to do: no retrying message in this partition (nothing for
 * the retry branch) and, under `group` ordering, no retrying or parked message with a group key in
 * the outbox (no group to skip). Then its rows are the full poll's; otherwise it returns none and
 * the worker polls in full. Both guards cost about a seventh of a drain's poll-and-settle (see
 * docs/benchmarks.md, "Issue 24, point 1"); the tallies' check is one look-up, made once.
 */
function readyOnlyPoll(
  table: QualifiedName,
  params: PollParams,
  read: (rows: readonly Row[]) => PollResult,
): Statement<PollResult> {
  const { messages, tallies } = tables(table);
  const { lease } = params;
  const p = Parameters.positional();
  const o = p.add(lease.outbox);
  const groupBlocking =
    params.ordering === 'group' ? ` OR (t.grouped = 1 AND t.status ${blocking(params.parkDead)})` : '';
  return p.statement(
    `SELECT ${COLUMNS}, 0 AS blocked FROM ${messages}
    WHERE NOT EXISTS (SELECT 1 FROM ${tallies} t WHERE t.outbox = ${o} AND t.n > 0 AND ((t.partition = ${p.add(lease.partition)} AND t.status = ${Status.retry})${groupBlocking}))
      AND outbox = ${p.add(lease.outbox)} AND partition = ${p.add(lease.partition)} AND status = ${Status.ready} AND id > ${p.add(params.afterId)}
    ORDER BY id LIMIT ${p.add(params.limit)}`,
    read,
  );
}
