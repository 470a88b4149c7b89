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
import { Status, unread, type Row, type SqlQuery, type Statement } from '../../core/sql.js';
import {
  configurationOf,
  readBlockedCounts,
  readBlockedHeads,
  readCountFigures,
  readEnvelope,
} from '../shared/columns.js';
import { Parameters } from '../shared/parameters.js';
import { blocking, COLUMNS, M_COLUMNS } from './shared.js';
import { configTable, tables } from './tables.js';

/**
 * Administration: what `counts()`, the listings, `retryDead()`, `discard()`, `blockedGroups()`,
 * the recorded configuration and `migrate()` run, outside any worker. None of these is fenced on a
 * lease; SQLite has one writer at a time, and keeps no cursor that a revived message could fall
 * below.
 */

/** The migration runs in a BEGIN IMMEDIATE transaction, which already excludes other writers. */
export function migrationLock(): SqlQuery[] {
  return [];
}

/** `major * 1000000 + minor * 1000 + patch`, from `sqlite_version()`. */
export function serverVersion(): Statement<number> {
  return Parameters.positional().statement(
    `SELECT CAST(substr(v, 1, instr(v, '.') - 1) AS INTEGER) * 1000000 + CAST(substr(r, 1, instr(r, '.') - 1) AS INTEGER) * 1000 + CAST(substr(r, instr(r, '.') + 1) AS INTEGER) AS version
FROM (SELECT sqlite_version() || '.0' AS v, substr(sqlite_version() || '.0', instr(sqlite_version(), '.') + 1) AS r)`,
    (rows) => Number(rows[0]?.version),
  );
}

/** The table or column a database error message says is missing, as `migrate()` would create it. */
export function missingSchemaObject(message: string): string | undefined {
  return (
    /no such table: (\S+)/.exec(message)?.[1] ??
    /table (\S+ has no column named \S+)/.exec(message)?.[1] ??
    /no such column: (\S+)/.exec(message)?.[1]
  );
}

/**
 * The figures from the outbox's tallies (see sqlite-schema.ts): exact, since the triggers change
 * them in the statement that changes the rows, and read from a few rows per partition however deep
 * the backlog, so `upTo` has nothing to save. The oldest pending message is the first pending row
 * in id order: the rowid from its start, which passes over older dead and delivered rows first.
 */
export function counts(
  table: QualifiedName,
  outbox: string,
  partitions: number,
  _upTo?: number,
): Statement<CountFigures> {
  const { messages, nodes, tallies } = tables(table);
  const p = Parameters.positional();
  const pending = `status < ${Status.dead}`;
  return p.statement(
    `SELECT coalesce(sum(n) FILTER (WHERE ${pending}), 0) AS pending, coalesce(sum(n) FILTER (WHERE status = ${Status.delivered}), 0) AS delivered,
  coalesce(sum(n) FILTER (WHERE status = ${Status.dead}), 0) AS dead, coalesce(sum(n) FILTER (WHERE ${pending} AND partition >= ${p.add(partitions)}), 0) AS orphaned,
  (SELECT inserted_at FROM ${messages} WHERE outbox = ${p.add(outbox)} AND ${pending} ORDER BY id LIMIT 1) AS oldest_pending_at,
  (SELECT max(last_seen) FROM ${nodes} WHERE outbox = ${p.add(outbox)}) AS relay_seen_at
FROM ${tallies} WHERE outbox = ${p.add(outbox)}`,
    readCountFigures,
  );
}

/**
 * Blocked groups by their head's status (see `blockedGroups`): the grouped retrying and, with
 * `parkDead`, the grouped dead rows, from the tallies: exact, a few rows per partition.
 */
export function blockedCounts(
  table: QualifiedName,
  outbox: string,
  parkDead: boolean,
  _upTo: number,
): Statement<BlockedCounts> {
  const p = Parameters.positional();
  return p.statement(
    `SELECT coalesce(sum(n) FILTER (WHERE status = ${Status.retry}), 0) AS retrying, ${parkDead ? `coalesce(sum(n) FILTER (WHERE status = ${Status.dead}), 0)` : '0'} AS parked
FROM ${tables(table).tallies} WHERE outbox = ${p.add(outbox)} AND grouped = 1`,
    (rows) => readBlockedCounts(rows),
  );
}

export function list(
  table: QualifiedName,
  outbox: string,
  which: 'pending' | 'dead',
  limit: number,
): Statement<PolledEnvelope[]> {
  const p = Parameters.positional();
  const filter = which === 'pending' ? `status < ${Status.dead}` : `status = ${Status.dead}`;
  return p.statement(
    `SELECT ${COLUMNS}, 0 AS blocked FROM ${tables(table).messages} WHERE outbox = ${p.add(outbox)} AND ${filter} ORDER BY id LIMIT ${p.add(limit)}`,
    (rows) => rows.map((row) => readEnvelope(row, outbox)),
  );
}

export function retryDead(
  table: QualifiedName,
  outbox: string,
  ids: readonly number[] | undefined,
  parkDead: boolean,
  now: number,
): Statement<number> {
  const p = Parameters.positional();
  const status = parkDead
    ? `CASE WHEN group_key IS NULL THEN ${Status.ready} ELSE ${Status.retry} END`
    : `${Status.ready}`;
  return p.statement(
    `UPDATE ${tables(table).messages} SET status = ${status}, attempts = 0, next_attempt_at = ${parkDead ? `CASE WHEN group_key IS NULL THEN NULL ELSE ${p.add(now)} END` : 'NULL'}, failing_since = NULL WHERE status = ${Status.dead} ${ids === undefined ? '' : `AND id IN (SELECT value FROM json_each(${p.json(ids)}))`} AND outbox = ${p.add(outbox)} RETURNING id`,
    (rows) => rows.length,
  );
}

export function discard(table: QualifiedName, outbox: string, ids: readonly number[]): Statement<number> {
  const p = Parameters.positional();
  return p.statement(
    `DELETE FROM ${tables(table).messages} WHERE outbox = ${p.add(outbox)} AND id IN (SELECT value FROM json_each(${p.json(ids)})) AND status <> ${Status.delivered} RETURNING id`,
    (rows) => rows.length,
  );
}

export function blockedGroups(
  table: QualifiedName,
  outbox: string,
  limit: number,
  parkDead: boolean,
  countWaiting = true,
  groupKeyPrefix?: string,
): Statement<BlockedHead[]> {
  const { messages } = tables(table);
  const p = Parameters.positional();
  // Built left to right: positional values follow the text.
  const prefix = () =>
    groupKeyPrefix === undefined
      ? ''
      : ` AND substr(group_key, 1, length(${p.add(groupKeyPrefix)})) = ${p.add(groupKeyPrefix)}`;
  // The heads from their partial index, materialized before they are ordered (ordered by id at
  // once, SQLite would walk the rowid through every row); the count reads the group's pending rows.
  // A prefix is checked on the index's entries (it holds the group key): the heads, not the backlog.
  return p.statement(
    `WITH heads AS MATERIALIZED (SELECT id FROM ${messages} WHERE outbox = ${p.add(outbox)} AND group_key IS NOT NULL AND status ${blocking(parkDead)}${prefix()}),
top AS (SELECT id FROM heads ORDER BY id LIMIT ${p.add(limit)})
SELECT h.group_key, h.id, h.status, h.attempts, h.last_error, h.next_attempt_at, h.failing_since,
  ${countWaiting ? `(SELECT count(*) FROM ${messages} w WHERE w.outbox = h.outbox AND w.group_key = h.group_key AND w.status IN (${Status.ready}, ${Status.held}) AND w.id > h.id)` : '0'} AS waiting
FROM top JOIN ${messages} h ON h.id = top.id ORDER BY h.id`,
    (rows) => readBlockedHeads(rows, outbox),
  );
}

export function readConfiguration(
  table: QualifiedName,
  outbox: string,
): Statement<RecordedConfiguration | undefined> {
  return configurationOf(Parameters.positional(), configTable(table), outbox);
}

export function writeConfiguration(
  table: QualifiedName,
  outbox: string,
  c: RecordedConfiguration,
  now: number,
  onlyIfAbsent = false,
): Statement<void> {
  const p = Parameters.positional();
  const conflict = onlyIfAbsent
    ? 'DO NOTHING'
    : 'DO UPDATE SET partitions = excluded.partitions, ordering = excluded.ordering, serialize_writes = excluded.serialize_writes, on_dead = excluded.on_dead, updated_at = excluded.updated_at';
  return unread(
    p.query(`INSERT INTO ${configTable(table)} (outbox, partitions, ordering, serialize_writes, on_dead, updated_at) VALUES (${p.add(outbox)}, ${p.add(c.partitions)}, ${p.add(c.ordering)}, ${p.add(c.serializeWrites ? 1 : 0)}, ${p.add(c.onDead)}, ${p.add(now)})
ON CONFLICT (outbox) ${conflict}`),
  );
}

/**
 * A bounded search (see `MessageFilter`): the first `scan` rows of the status after `afterId`, in
 * id order, then those of them that match. Dead rows come from the `_dead` index (outbox, id);
 * pending rows from the rowid in id order. At most `scan` matching-status rows are read.
 */
export function findMessages(
  table: QualifiedName,
  outbox: string,
  f: MessageFilter,
): Statement<FoundMessages> {
  const { messages } = tables(table);
  const p = Parameters.positional();
  const status = f.which === 'pending' ? `status < ${Status.dead}` : `status = ${Status.dead}`;
  // Built left to right: positional values follow the text.
  const where = () => {
    const filters: string[] = [];
    if (f.groupKey !== undefined) filters.push(`group_key = ${p.add(f.groupKey)}`);
    if (f.type !== undefined) filters.push(`type = ${p.add(f.type)}`);
    if (f.error !== undefined) filters.push(`instr(last_error, ${p.add(f.error)}) > 0`);
    return filters.length === 0 ? '' : ` WHERE ${filters.join(' AND ')}`;
  };
  return p.statement(
    `WITH scanned AS (SELECT id, group_key, type, last_error FROM ${messages} WHERE outbox = ${p.add(outbox)} AND ${status} AND id > ${p.add(f.afterId)} ORDER BY id LIMIT ${p.add(f.scan)}),
hits AS (SELECT id AS hit FROM scanned${where()} ORDER BY id LIMIT ${p.add(f.limit)})
SELECT e.scanned_rows, e.scanned_to, ${M_COLUMNS}
FROM (SELECT count(*) AS scanned_rows, max(id) AS scanned_to FROM scanned) e
LEFT JOIN (hits JOIN ${messages} m ON m.id = hits.hit) ON 1 ORDER BY m.id`,
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
