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
import {
  batch,
  Status,
  unread,
  type Batch,
  type Row,
  type SqlQuery,
  type Statement,
} from '../../core/sql.js';
import {
  configurationOf,
  readBlockedCounts,
  readBlockedHeads,
  readCountFigures,
  readEnvelope,
} from '../shared/columns.js';
import { Parameters } from '../shared/parameters.js';
import { blockingStatus } from '../shared/statuses.js';
import { byIds, COLUMNS, M_COLUMNS, NOW_MS, PARTITION, TALLY_COLUMNS } from './shared.js';
import { configTable, tables } from './tables.js';

/**
 * Administration: what `counts()`, the listings, `findMessages()`, `retryDead()`, `discard()`,
 * `blockedGroups()`, the recorded configuration and `migrate()` run, outside any worker.
 *
 * Locking: none of these is fenced on a lease. `retryDead()` and `discard()` lock the rows they
 * change first (`SELECT … FOR UPDATE`), then write their tally and the change in the same
 * transaction; a worker settling one of those rows waits, or has settled it already and the change
 * no longer matches it. Polls keep no cursor on MySQL, so revived messages need no rewind: the next
 * poll reads from the beginning. `counts()` reads the tallies, which every change commits with.
 */

/**
 * None. MySQL commits every DDL statement implicitly, so a lock taken in the migration's transaction
 * (`SELECT … FOR UPDATE` on a lock row) would be released by the first CREATE, and a session lock
 * (`GET_LOCK`) is lost to a pooler that hands the next statement to another connection. Instead,
 * every statement of `mysqlSchema` is one idempotent, atomic `CREATE … IF NOT EXISTS`: instances
 * migrating at once queue on the table's metadata lock, and each creates the table or finds it
 * (test/engine/lifecycle.test.ts runs several at once).
 */
export function migrationLock(): SqlQuery[] {
  return [];
}

/**
 * The server version as a number that one minimum can judge: MariaDB's own (10.6.0 = 100600),
 * and MySQL 8.0.4 or newer (`JSON_TABLE`, `SKIP LOCKED`, the features this dialect needs) from
 * 100600 up, older MySQL below it.
 */
export function serverVersion(): Statement<number> {
  return Parameters.positional().statement(`SELECT VERSION() AS version`, (rows) =>
    versionNumber(String(rows[0]?.version ?? '')),
  );
}

export function versionNumber(version: string): number {
  const [major = 0, minor = 0, patch = 0] = (/^(\d+)\.(\d+)\.(\d+)/.exec(version) ?? []).slice(1).map(Number);
  const number = major * 10_000 + minor * 100 + patch;
  if (/mariadb/i.test(version) || major >= 10) return number;
  return number >= 80_004 ? 100_600 + (number - 80_004) : number;
}

/** The table or column a database error message says is missing, as `migrate()` would create it. */
export function missingSchemaObject(message: string): string | undefined {
  return /Table '([^']+)' doesn't exist/.exec(message)?.[1] ?? /Unknown column '([^']+)'/.exec(message)?.[1];
}

/**
 * The figures from the outbox's tallies (see `compactTallies`), read from a few rows per partition
 * however deep the backlog. The oldest pending message is one probe of `_status` (outbox, status,
 * id) per pending status.
 */
export function counts(table: QualifiedName, outbox: string, partitions: number): Statement<CountFigures> {
  const { messages, nodes, tallies } = tables(table);
  const p = Parameters.positional();
  const oldest = () =>
    [Status.ready, Status.retry, Status.held]
      .map(
        (status) =>
          `(SELECT MIN(id) AS id FROM ${messages} WHERE outbox = ${p.add(outbox)} AND status = ${status})`,
      )
      .join(' UNION ALL ');
  return p.statement(
    `SELECT COALESCE(SUM(pending), 0) AS pending, COALESCE(SUM(delivered), 0) AS delivered, COALESCE(SUM(dead), 0) AS dead,
  COALESCE(SUM(CASE WHEN ${PARTITION} >= ${p.add(partitions)} THEN pending END), 0) AS orphaned,
  (SELECT inserted_at FROM ${messages} WHERE id = (SELECT MIN(id) FROM (${oldest()}) AS heads)) AS oldest_pending_at,
  (SELECT MAX(last_seen) FROM ${nodes} WHERE outbox = ${p.add(outbox)}) AS relay_seen_at
FROM ${tallies} WHERE outbox = ${p.add(outbox)}`,
    readCountFigures,
  );
}

export function readConfiguration(
  table: QualifiedName,
  outbox: string,
): Statement<RecordedConfiguration | undefined> {
  return configurationOf(Parameters.positional(), configTable(table), outbox);
}

/**
 * Records an outbox's configuration; with `onlyIfAbsent`, only when none is recorded. A second
 * node inserting at the same time waits for the first's row (its duplicate-key check), then
 * leaves it as it is.
 */
export function writeConfiguration(
  table: QualifiedName,
  outbox: string,
  c: RecordedConfiguration,
  _now: number,
  onlyIfAbsent = false,
): Statement<void> {
  const p = Parameters.positional();
  const values = `(${p.add(outbox)}, ${p.add(c.partitions)}, ${p.add(c.ordering)}, ${p.add(c.serializeWrites ? 1 : 0)}, ${p.add(c.onDead)}, ${NOW_MS}, ${NOW_MS})`;
  const update = onlyIfAbsent
    ? 'outbox = outbox'
    : `partitions = ${p.add(c.partitions)}, ordering = ${p.add(c.ordering)}, serialize_writes = ${p.add(c.serializeWrites ? 1 : 0)}, on_dead = ${p.add(c.onDead)}, updated_at = ${NOW_MS}`;
  return unread(
    p.query(
      `INSERT INTO ${configTable(table)} (outbox, partitions, ordering, serialize_writes, on_dead, updated_at, recounted_at) VALUES ${values} ON DUPLICATE KEY UPDATE ${update}`,
    ),
  );
}

/** Pending (by id, the primary key) or dead (`_status` (outbox, status, id)) messages, oldest first. */
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

/**
 * Dead messages back to pending (with `parkDead`, as due retries, so they still block their group
 * until delivered); how many. Locks them and keeps their ids (`@outboxer_revived`), tallies them,
 * revives them.
 */
export function retryDead(
  table: QualifiedName,
  outbox: string,
  ids: readonly number[] | undefined,
  parkDead: boolean,
): Batch<number> {
  const { messages, tallies } = tables(table);
  const lock = Parameters.positional();
  const tally = Parameters.positional();
  const status = parkDead
    ? `CASE WHEN m.group_key IS NULL THEN ${Status.ready} ELSE ${Status.retry} END`
    : `${Status.ready}`;
  const next = parkDead ? `CASE WHEN m.group_key IS NULL THEN NULL ELSE ${NOW_MS} END` : 'NULL';
  return batch(
    [
      lock.query(
        `SET @outboxer_revived = (SELECT JSON_ARRAYAGG(id) FROM (SELECT id FROM ${messages} WHERE outbox = ${lock.add(outbox)} AND status = ${Status.dead}${ids === undefined ? '' : ` AND id IN (${lock.list(ids)})`} FOR UPDATE) AS revived)`,
      ),
      tally.query(
        `INSERT INTO ${tallies} ${TALLY_COLUMNS} SELECT ${tally.add(outbox)}, m.${PARTITION}, COUNT(*), -COUNT(*), 0 FROM ${byIds('@outboxer_revived', messages, 'm')} GROUP BY m.${PARTITION}`,
      ),
      {
        text: `UPDATE ${byIds('@outboxer_revived', messages, 'm')} SET m.status = ${status}, m.attempts = 0, m.next_attempt_at = ${next}, m.failing_since = NULL`,
        values: [],
      },
      { text: `SELECT COALESCE(JSON_LENGTH(@outboxer_revived), 0) AS revived`, values: [] },
    ],
    (results) => Number(results[results.length - 1]![0]?.revived ?? 0),
  );
}

/**
 * Removes messages (not delivered ones); how many. Locks the listed rows by primary key first: a
 * row is then tallied and removed as it is, and no one changes it in between.
 */
export function discard(table: QualifiedName, outbox: string, ids: readonly number[]): Batch<number> {
  const { messagesById, tallies } = tables(table);
  const lock = Parameters.positional();
  const tally = Parameters.positional();
  const remove = Parameters.positional();
  return batch(
    [
      lock.query(
        `SELECT id FROM ${messagesById()} WHERE id IN (${lock.list(ids)}) AND outbox = ${lock.add(outbox)} FOR UPDATE`,
      ),
      tally.query(
        `INSERT INTO ${tallies} ${TALLY_COLUMNS} SELECT ${tally.add(outbox)}, ${PARTITION}, -COALESCE(SUM(status < ${Status.dead}), 0), -COALESCE(SUM(status = ${Status.dead}), 0), 0
FROM ${messagesById()} WHERE id IN (${tally.list(ids)}) AND outbox = ${tally.add(outbox)} AND status <> ${Status.delivered} GROUP BY ${PARTITION}`,
      ),
      remove.query(
        `DELETE m FROM ${messagesById('m')} WHERE m.id IN (${remove.list(ids)}) AND m.outbox = ${remove.add(outbox)} AND m.status <> ${Status.delivered}`,
      ),
      { text: `SELECT ROW_COUNT() AS discarded`, values: [] },
    ],
    (results) => Number(results[results.length - 1]![0]?.discarded ?? 0),
  );
}

/**
 * Groups held by a retrying (or parked dead) head, oldest head first. The heads are a range of
 * `_status` (outbox, status, id) per blocking status, materialized (a derived table with its own
 * LIMIT) before they are joined: ordered by id straight away, MySQL may walk the primary key
 * through every row of a deep backlog. With `countWaiting`, what waits behind each head is counted
 * from `_groups_status` (outbox, group_key, status): that count grows with the group's backlog.
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
  const p = Parameters.positional();
  const waiting = countWaiting
    ? `(SELECT COUNT(*) FROM ${messages} w WHERE w.outbox = h.outbox AND w.group_key = h.group_key AND w.status IN (${Status.ready}, ${Status.held}) AND w.id > h.id)`
    : '0';
  // Built left to right: positional values follow the text. Checked on the heads alone; the
  // column's collation is binary, so the prefix is case-sensitive.
  const prefix = () =>
    groupKeyPrefix === undefined
      ? ''
      : ` AND LEFT(group_key, CHAR_LENGTH(${p.add(groupKeyPrefix)})) = ${p.add(groupKeyPrefix)}`;
  return p.statement(
    `SELECT h.group_key, h.id, h.status, h.attempts, h.last_error, h.next_attempt_at, h.failing_since, ${waiting} AS waiting
FROM (SELECT id FROM ${messages} WHERE outbox = ${p.add(outbox)} AND group_key IS NOT NULL AND ${blockingStatus(parkDead, 'status')}${prefix()} ORDER BY id LIMIT ${p.add(limit)}) AS top
JOIN ${messages} h ON h.id = top.id
ORDER BY h.id`,
    (rows) => readBlockedHeads(rows, outbox),
  );
}

/**
 * Blocked groups by their head's status (see `blockedGroups`), each counted up to `upTo` from a
 * range of `_status` (outbox, status, id): the blocked groups, never the backlog. Reads only.
 */
export function blockedCounts(
  table: QualifiedName,
  outbox: string,
  parkDead: boolean,
  upTo: number,
): Statement<BlockedCounts> {
  const { messages } = tables(table);
  const p = Parameters.positional();
  const count = (status: number) =>
    `(SELECT COUNT(*) FROM (SELECT 1 FROM ${messages} WHERE outbox = ${p.add(outbox)} AND status = ${status} AND group_key IS NOT NULL LIMIT ${p.add(upTo)}) AS heads)`;
  return p.statement(
    `SELECT ${count(Status.retry)} AS retrying, ${parkDead ? count(Status.dead) : '0'} AS parked`,
    (rows) => readBlockedCounts(rows, upTo),
  );
}

/**
 * A bounded search (see `MessageFilter`): the first `scan` rows of the status after `afterId`, in
 * id order, then those of them that match. Dead rows are a range of `_status` (outbox, status, id)
 * in id order; pending rows (three statuses, which no one index range holds in id order) come from
 * the primary key from `afterId` on, which starts at the oldest pending message when delivered rows
 * are not kept. Either way the statement reads at most `scan` matching-status rows, whatever the
 * depth of the backlog. Reads only; takes no lock. The error filter is case-sensitive: the column's
 * collation is binary.
 */
export function findMessages(
  table: QualifiedName,
  outbox: string,
  f: MessageFilter,
): Statement<FoundMessages> {
  const { messages, messagesById } = tables(table);
  const p = Parameters.positional();
  const source = f.which === 'pending' ? messagesById() : messages;
  const status = f.which === 'pending' ? `status < ${Status.dead}` : `status = ${Status.dead}`;
  // Built left to right: positional values follow the text.
  const scanned = `SELECT id, group_key, type, last_error FROM ${source} WHERE outbox = ${p.add(outbox)} AND ${status} AND id > ${p.add(f.afterId)} ORDER BY id LIMIT ${p.add(f.scan)}`;
  const filters: string[] = [];
  if (f.groupKey !== undefined) filters.push(`group_key = ${p.add(f.groupKey)}`);
  if (f.type !== undefined) filters.push(`type = ${p.add(f.type)}`);
  if (f.error !== undefined) filters.push(`INSTR(last_error, ${p.add(f.error)}) > 0`);
  const where = filters.length === 0 ? '' : ` WHERE ${filters.join(' AND ')}`;
  return p.statement(
    `WITH scanned AS (${scanned}),
hits AS (SELECT id AS hit FROM scanned${where} ORDER BY id LIMIT ${p.add(f.limit)})
SELECT e.scanned_rows, e.scanned_to, ${M_COLUMNS}, 0 AS blocked
FROM (SELECT COUNT(*) AS scanned_rows, MAX(id) AS scanned_to FROM scanned) AS e
LEFT JOIN (hits JOIN ${messages} m ON m.id = hits.hit) ON TRUE
ORDER BY m.id`,
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
