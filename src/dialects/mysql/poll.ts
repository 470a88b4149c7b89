import type { PollParams, PollResult } from '../../core/dialect.js';
import type { QualifiedName } from '../../core/identifiers.js';
import { Status, type Row, type Statement } from '../../core/sql.js';
import { nextRetryOf, polledMessages } from '../shared/columns.js';
import { Parameters } from '../shared/parameters.js';
import { COLUMNS, M_COLUMNS, NOW_MS, PARTITION } from './shared.js';
import { tables } from './tables.js';

/**
 * Polling: the rows a worker delivers next.
 *
 * Locking: none. A poll is one autocommit SELECT, a consistent read on its own read view (InnoDB
 * takes one per statement outside a transaction), so the retries, the ready rows and the blocking
 * heads it probes are read at one moment. Writes that follow a poll (hold, settle) are fenced on
 * the lease; the poll need not be.
 *
 * Order under concurrent writers: ids are drawn at insert, not at commit, so a transaction can
 * commit a message below ids already delivered. MySQL reports no snapshot a poll could check that
 * against (Postgres' `pg_current_snapshot()`), so the dialect keeps no cursor
 * (`capabilities.pollCursor` false): every poll reads its partition's ready range from its first
 * entry, and a message committed late is found by the next poll, before any message of its group
 * published after that commit (a later id). Two transactions publishing to one group at the same
 * time commit in either order; `serializeWrites` (publish.ts) makes the second wait for the first.
 * The cost: a poll steps over the index entries of rows deleted since InnoDB's purge last ran
 * (usually a batch or two; more while a long transaction holds the purge back).
 */

/** Retries due before this, Unix milliseconds: the server's clock unless the engine says otherwise. */
function due(p: Parameters, params: PollParams): string {
  if (params.dueBefore === 'infinity') return p.add(Number.MAX_SAFE_INTEGER);
  return params.dueBefore === null ? NOW_MS : p.add(params.dueBefore.getTime());
}

/** The message rows' share of the next-retry row's columns. */
const NO_NEXT_RETRY = 'NULL AS next_retry_at, NULL AS database_now';

/** The next-retry row's share of {@link COLUMNS}. */
const NULL_COLUMNS = COLUMNS.split(', ')
  .map(() => 'NULL')
  .join(', ');

/**
 * One more row, of nulls but the partition's earliest retry and the server's clock, which an idle
 * worker needs to know how long to sleep: an empty poll then needs no statement of its own to read
 * them. Always there (a UNION cannot tell whether its other branches found rows); the reader uses
 * it only when they found none. `MIN` over the `_retry` index is one index dive.
 */
function nextRetryRow(messages: string, p: Parameters, outbox: string, partition: number): string {
  return `SELECT ${NULL_COLUMNS}, NULL, (SELECT MIN(next_attempt_at) FROM ${messages} WHERE outbox = ${p.add(outbox)} AND ${PARTITION} = ${p.add(partition)} AND status = ${Status.retry}), ${NOW_MS}`;
}

export function poll(table: QualifiedName, params: PollParams): Statement<PollResult> {
  const { messages, messagesUsing } = tables(table);
  const { lease } = params;
  const p = Parameters.positional();
  // No cursor and no publishers to watch: the engine orders the rows by id.
  const read = (rows: readonly Row[]): PollResult => {
    const messages = polledMessages(rows, lease.outbox);
    // Found nothing: the one row left is the next-retry row.
    const info = messages.length === 0 ? rows[0] : undefined;
    return {
      messages,
      start: undefined,
      publishersQuiet: false,
      nextRetry: info === undefined ? undefined : nextRetryOf(info.next_retry_at, info.database_now),
    };
  };
  if (params.ordering === 'total') {
    // The lowest blocking message of the partition, from `_ready` (outbox, partition, status, id):
    // one index probe per blocking status. While it waits for its retry (or is parked dead),
    // nothing else of the outbox moves.
    const head = () => {
      const statuses = params.parkDead ? [Status.retry, Status.dead] : [Status.retry];
      const probes = statuses.map(
        (status) =>
          `(SELECT MIN(id) AS id FROM ${messages} WHERE outbox = ${p.add(lease.outbox)} AND ${PARTITION} = ${p.add(lease.partition)} AND status = ${status})`,
      );
      return `(SELECT MIN(id) FROM (${probes.join(' UNION ALL ')}) AS heads)`;
    };
    return p.statement(
      `SELECT ${COLUMNS}, 0 AS blocked, ${NO_NEXT_RETRY} FROM ${messages} WHERE id = ${head()} AND next_attempt_at <= ${due(p, params)}
UNION ALL
(SELECT ${COLUMNS}, 0 AS blocked, ${NO_NEXT_RETRY} FROM ${messagesUsing('ready', 'm')}
  WHERE ${head()} IS NULL AND outbox = ${p.add(lease.outbox)} AND ${PARTITION} = ${p.add(lease.partition)} AND status = ${Status.ready} AND id > ${p.add(params.afterId)}
  ORDER BY id LIMIT ${p.add(params.limit)})
UNION ALL
${nextRetryRow(messages, p, lease.outbox, lease.partition)}`,
      read,
      true,
    );
  }
  // Ready messages of a group whose head waits for a retry (or is parked dead) are flagged
  // `blocked`; the engine moves them to `held`, so later polls never step over them. Each range
  // names its index (FORCE INDEX): statistics of an empty table must not turn the probe into a
  // scan. One probe per blocking status, each an equality on the three columns of
  // `_groups_status` (outbox, group_key, status): MariaDB's look-up for a correlated subquery
  // stops at a column compared with `IN`, and then read every pending row of the group, for each
  // polled row of it (100 rows a probe with 100 pending a group).
  const blockingStatuses = params.parkDead ? [Status.retry, Status.dead] : [Status.retry];
  const probe = (status: number) =>
    `EXISTS (SELECT 1 FROM ${messagesUsing('groups_status', 'h')} WHERE h.outbox = m.outbox AND h.group_key = m.group_key AND h.status = ${status})`;
  const blocked =
    params.ordering === 'group'
      ? `(m.group_key IS NOT NULL AND (${blockingStatuses.map(probe).join(' OR ')}))`
      : '0';
  // Retries due from `_retry` (outbox, partition, status, next_attempt_at), then ready rows from
  // `_ready` (outbox, partition, status, id), each a range of one index read in its order.
  return p.statement(
    `(SELECT ${M_COLUMNS}, 0 AS blocked, ${NO_NEXT_RETRY} FROM ${messagesUsing('retry', 'm')}
  WHERE m.outbox = ${p.add(lease.outbox)} AND m.${PARTITION} = ${p.add(lease.partition)} AND m.status = ${Status.retry} AND m.next_attempt_at <= ${due(p, params)}
  ORDER BY m.next_attempt_at LIMIT ${p.add(params.limit)})
UNION ALL
(SELECT ${M_COLUMNS}, ${blocked} AS blocked, ${NO_NEXT_RETRY} FROM ${messagesUsing('ready', 'm')}
  WHERE m.outbox = ${p.add(lease.outbox)} AND m.${PARTITION} = ${p.add(lease.partition)} AND m.status = ${Status.ready} AND m.id > ${p.add(params.afterId)}
  ORDER BY m.id LIMIT ${p.add(params.limit)})
UNION ALL
${nextRetryRow(messages, p, lease.outbox, lease.partition)}`,
    read,
    true,
  );
}
