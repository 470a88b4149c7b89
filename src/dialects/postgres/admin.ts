import type {
  BlockedCounts,
  BlockedHead,
  CountFigures,
  FoundMessages,
  MessageFilter,
  PolledEnvelope,
  RecordedConfiguration,
} from '../../core/dialect.js';
import type { QualifiedName } from '../../core/identifiers.js';
import { Status, type Row, type SqlQuery, type Statement } from '../../core/sql.js';
import {
  configurationOf,
  readBlockedCounts,
  readBlockedHeads,
  readCountFigures,
  readEnvelope,
} from '../shared/columns.js';
import { Parameters } from '../shared/parameters.js';
import { COLUMNS, REMOVED, tally } from './shared.js';
import { configTable, tables } from './tables.js';

/**
 * Administration: what `counts()`, the listings, `retryDead()`, `discard()`, `blockedGroups()`,
 * the recorded configuration and `migrate()` run, outside any worker.
 *
 * Locking: none of these is fenced on a lease. `retryDead()` and `discard()` make messages ready
 * below the workers' cursors, so the engine runs `countRewind` (leases.ts) first in their
 * transaction: it takes the lease rows before any message row, the order a worker's settle takes
 * them in. `counts()` reads the tallies on its statement's snapshot, which every change commits
 * with. Concurrent `migrate()` calls queue on one transaction-scoped advisory lock.
 */

/** Statements that make concurrent `migrate()` calls wait for each other. */
export function migrationLock(): SqlQuery[] {
  return [
    // Wrapped so the statement returns an ordinary column: some clients (Prisma) cannot read `void`.
    {
      text: `SELECT 1 AS locked FROM (SELECT pg_advisory_xact_lock(hashtextextended('outboxer:migrate', 0))) AS l`,
      values: [],
    },
  ];
}

/** The server version as a number (150004). */
export function serverVersion(): Statement<number> {
  return Parameters.numbered().statement(
    `SELECT current_setting('server_version_num')::int AS version`,
    (rows) => Number(rows[0]?.version),
  );
}

/** The table or column a database error message says is missing, as `migrate()` would create it. */
export function missingSchemaObject(message: string): string | undefined {
  return (
    /column ("[^"]+" of relation "[^"]+") does not exist/.exec(message)?.[1] ??
    /relation ("[^"]+") does not exist/.exec(message)?.[1] ??
    /function (\S+)\(.*\) does not exist/.exec(message)?.[1]
  );
}

/**
 * The figures from the outbox's tallies (see `tally`): exact on the statement's snapshot, since
 * every change commits with its tally, and read from a few rows per partition however deep the
 * backlog, so `upTo` has nothing to save. The oldest pending message is one probe of each of the
 * three pending indexes.
 */
export function counts(table: QualifiedName, outbox: string, partitions: number): Statement<CountFigures> {
  const { messages, nodes, tallies } = tables(table);
  const p = Parameters.numbered();
  const o = p.add(outbox);
  const orphanedFrom = p.add(partitions);
  const pending = `${Status.ready}, ${Status.retry}, ${Status.held}`;
  return p.statement(
    `SELECT coalesce(sum(pending), 0) AS pending, coalesce(sum(delivered), 0) AS delivered, coalesce(sum(dead), 0) AS dead,
  coalesce(sum(pending) FILTER (WHERE partition >= ${orphanedFrom}), 0) AS orphaned,
  (SELECT min(inserted_at) FROM ${messages} WHERE id = (SELECT min(id) FROM ${messages} WHERE outbox = ${o} AND status IN (${pending}))) AS oldest_pending_at,
  (SELECT max(last_seen) FROM ${nodes} WHERE outbox = ${o}) AS relay_seen_at
FROM ${tallies} WHERE outbox = ${o}`,
    readCountFigures,
  );
}

/** The recorded configuration of an outbox, or `undefined`. */
export function readConfiguration(
  table: QualifiedName,
  outbox: string,
): Statement<RecordedConfiguration | undefined> {
  return configurationOf(Parameters.numbered(), configTable(table), outbox);
}

/** Records an outbox's configuration; with `onlyIfAbsent`, only when none is recorded. */
export function writeConfiguration(
  table: QualifiedName,
  outbox: string,
  c: RecordedConfiguration,
  _now: number,
  onlyIfAbsent = false,
): Statement<void> {
  const conflict = onlyIfAbsent
    ? 'DO NOTHING'
    : 'DO UPDATE SET partitions = EXCLUDED.partitions, ordering = EXCLUDED.ordering, serialize_writes = EXCLUDED.serialize_writes, on_dead = EXCLUDED.on_dead, updated_at = now()';
  const p = Parameters.numbered();
  return p.statement(
    `INSERT INTO ${configTable(table)} (outbox, partitions, ordering, serialize_writes, on_dead, updated_at) VALUES (${p.add(outbox)}, ${p.add(c.partitions)}, ${p.add(c.ordering)}, ${p.add(c.serializeWrites)}, ${p.add(c.onDead)}, now())
ON CONFLICT (outbox) ${conflict}`,
    () => undefined,
  );
}

export function list(
  table: QualifiedName,
  outbox: string,
  which: 'pending' | 'dead',
  limit: number,
): Statement<PolledEnvelope[]> {
  const { messages } = tables(table);
  const filter = which === 'pending' ? `status < ${Status.dead}` : `status = ${Status.dead}`;
  const p = Parameters.numbered();
  return p.statement(
    `SELECT ${COLUMNS}, false AS blocked FROM ${messages} WHERE outbox = ${p.add(outbox)} AND ${filter} ORDER BY id LIMIT ${p.add(limit)}`,
    (rows) => rows.map((row) => readEnvelope(row, outbox)),
  );
}

/** Dead messages back to pending; how many. */
export function retryDead(
  table: QualifiedName,
  outbox: string,
  ids: readonly number[] | undefined,
  parkDead: boolean,
): Statement<number> {
  const { messages, tallies } = tables(table);
  const p = Parameters.numbered();
  const o = p.add(outbox);
  const idFilter = ids === undefined ? '' : `AND id = ANY(${p.add(ids)}::bigint[])`;
  // A parked message comes back as a due retry, so its group stays held until it is delivered.
  const status = parkDead
    ? `CASE WHEN group_key IS NULL THEN ${Status.ready} ELSE ${Status.retry} END`
    : `${Status.ready}`;
  const next = parkDead ? 'CASE WHEN group_key IS NULL THEN NULL ELSE now() END' : 'NULL';
  return p.statement(
    `WITH revived AS (UPDATE ${messages} SET status = ${status}, attempts = 0, next_attempt_at = ${next}, failing_since = NULL WHERE outbox = ${o} AND status = ${Status.dead} ${idFilter} RETURNING id, partition, status),
tallied AS (${tally(tallies, o, 'revived', 'count(*), -count(*), 0')})
SELECT id FROM revived`,
    (rows) => rows.length,
  );
}

/** Removes messages (not delivered ones); how many. */
export function discard(table: QualifiedName, outbox: string, ids: readonly number[]): Statement<number> {
  const { messages, tallies } = tables(table);
  const p = Parameters.numbered();
  const o = p.add(outbox);
  return p.statement(
    `WITH discarded AS (DELETE FROM ${messages} WHERE outbox = ${o} AND id = ANY(${p.add(ids)}::bigint[]) AND status <> ${Status.delivered} RETURNING id, partition, status),
tallied AS (${tally(tallies, o, 'discarded', REMOVED)})
SELECT id FROM discarded`,
    (rows) => rows.length,
  );
}

/**
 * Groups held by a retrying (or parked dead) head, oldest head first. The heads come from a
 * partial index (`_retry`, or `_blocking` when dead messages park), materialized before they are
 * ordered: ordered by id straight away, the planner walks the primary key and, with few heads at a
 * deep backlog, reads every row. What waits behind a head: its held rows from `_held`, and the
 * ready rows of its partition after it from `_ready` (a group lives in one partition), each
 * checked for its group: that count grows with the partition's ready backlog behind the head.
 */
export function blockedGroups(
  table: QualifiedName,
  outbox: string,
  limit: number,
  parkDead: boolean,
  countWaiting = true,
  groupKeyPrefix?: string,
): Statement<BlockedHead[]> {
  const { messages } = tables(table);
  const p = Parameters.numbered();
  const o = p.add(outbox);
  // Checked on the heads alone (`_blocking` holds the group key): a scan of the blocked groups.
  const prefix = groupKeyPrefix === undefined ? '' : ` AND starts_with(group_key, ${p.add(groupKeyPrefix)})`;
  const waiting = countWaiting
    ? `(SELECT count(*) FROM ${messages} w WHERE w.outbox = h.outbox AND w.group_key = h.group_key AND w.status = ${Status.held} AND w.id > h.id)
  + (SELECT count(*) FROM ${messages} w WHERE w.outbox = h.outbox AND w.partition = h.partition AND w.status = ${Status.ready} AND w.id > h.id AND w.group_key = h.group_key)`
    : '0';
  const heads = parkDead ? `status IN (${Status.retry}, ${Status.dead})` : `status = ${Status.retry}`;
  return p.statement(
    `WITH heads AS MATERIALIZED (SELECT id FROM ${messages} WHERE outbox = ${o} AND group_key IS NOT NULL AND ${heads}${prefix}),
top AS (SELECT id FROM heads ORDER BY id LIMIT ${p.add(limit)})
SELECT h.group_key, h.id, h.status, h.attempts, h.last_error, h.next_attempt_at, h.failing_since, ${waiting} AS waiting
FROM top JOIN ${messages} h ON h.id = top.id
ORDER BY h.id`,
    (rows) => readBlockedHeads(rows, outbox),
  );
}

/**
 * Blocked groups by their head's status (see `blockedGroups`), each counted up to `upTo` from the
 * heads' partial indexes (`_retry`, `_dead` or `_blocking`): the blocked groups, never the backlog.
 */
export function blockedCounts(
  table: QualifiedName,
  outbox: string,
  parkDead: boolean,
  upTo: number,
): Statement<BlockedCounts> {
  const { messages } = tables(table);
  const p = Parameters.numbered();
  const o = p.add(outbox);
  const cap = p.add(upTo);
  const count = (status: number) =>
    `(SELECT count(*)::int FROM (SELECT 1 FROM ${messages} WHERE outbox = ${o} AND status = ${status} AND group_key IS NOT NULL LIMIT ${cap}) AS heads)`;
  return p.statement(
    `SELECT ${count(Status.retry)} AS retrying, ${parkDead ? count(Status.dead) : '0'} AS parked`,
    (rows) => readBlockedCounts(rows, upTo),
  );
}

/**
 * A bounded search (see `MessageFilter`): the first `scan` rows of the status after `afterId`, in
 * id order, then those of them that match. Dead rows come from the `_dead` index (outbox, id);
 * pending rows (three statuses, no one partial index) from the primary key in id order, which
 * starts at the oldest pending message when delivered rows are not kept. Either way the statement
 * reads at most `scan` matching-status rows, whatever the depth of the backlog.
 */
export function findMessages(
  table: QualifiedName,
  outbox: string,
  f: MessageFilter,
): Statement<FoundMessages> {
  const { messages } = tables(table);
  const p = Parameters.numbered();
  const status = f.which === 'pending' ? `status < ${Status.dead}` : `status = ${Status.dead}`;
  const filters: string[] = [];
  if (f.groupKey !== undefined) filters.push(`group_key = ${p.add(f.groupKey)}`);
  if (f.type !== undefined) filters.push(`type = ${p.add(f.type)}`);
  if (f.error !== undefined) filters.push(`strpos(last_error, ${p.add(f.error)}) > 0`);
  const where = filters.length === 0 ? '' : ` WHERE ${filters.join(' AND ')}`;
  return p.statement(
    `WITH scanned AS (SELECT id, group_key, type, last_error FROM ${messages} WHERE outbox = ${p.add(outbox)} AND ${status} AND id > ${p.add(f.afterId)} ORDER BY id LIMIT ${p.add(f.scan)}),
hits AS (SELECT id AS hit FROM scanned${where} ORDER BY id LIMIT ${p.add(f.limit)})
SELECT e.scanned_rows, e.scanned_to, ${COLUMNS}
FROM (SELECT count(*)::int AS scanned_rows, max(id) AS scanned_to FROM scanned) e
LEFT JOIN (hits JOIN ${messages} ON id = hit) ON true ORDER BY id`,
    (rows) => readFound(rows, outbox),
  );
}

/** The rows of `findMessages`: the scan's extent on every row, a message on each but a lone miss. */
function readFound(rows: readonly Row[], outbox: string): FoundMessages {
  const first = rows[0];
  return {
    messages: rows
      .filter((row) => row.id !== null && row.id !== undefined)
      .map((row) => readEnvelope(row, outbox)),
    scanned: Number(first?.scanned_rows ?? 0),
    scannedTo:
      first?.scanned_to === null || first?.scanned_to === undefined ? null : Number(first.scanned_to),
  };
}
