import type {
  RecordedConfiguration,
  AcquireParams,
  Dialect,
  InsertRow,
  LeaseToken,
  PollParams,
  SettleParams,
  SqlQuery,
} from '../../core/database.js';
import { companion, quoteName, type QualifiedName } from '../../core/identifiers.js';
import { readEnvelope } from '../shared/columns.js';
import { blockingStatus } from '../shared/statuses.js';
import { sqliteSchema } from './sqlite-schema.js';

/**
 * Every statement outboxer runs on SQLite. Same layout and status values as Postgres; times are
 * Unix milliseconds from the process clock (SQLite is single-node). Arrays travel as one JSON
 * parameter read with `json_each`. SQLite has one writer at a time, so no row locks are needed.
 */

const COLUMNS = `id, partition, group_key, type, payload, headers, attempts, last_error, next_attempt_at, failing_since, inserted_at, status`;

/**
 * The statuses that hold a group back, unspelled: for the total order's head, read from `_retry`
 * by partition, and the list of heads. Probes of one group use {@link blockingStatus}.
 */
function blocking(parkDead: boolean): string {
  return parkDead ? 'IN (1, 3)' : '= 1';
}

/** Builds text and values together so `?` placeholders always line up with their values. */
class Sql {
  readonly values: unknown[] = [];
  param(value: unknown): string {
    this.values.push(value);
    return '?';
  }
  json(value: unknown): string {
    return this.param(JSON.stringify(value));
  }
  query(text: string): SqlQuery {
    return { text, values: this.values };
  }
}

function tables(table: QualifiedName) {
  return {
    messages: quoteName(table),
    leases: quoteName(companion(table, 'leases')),
    nodes: quoteName(companion(table, 'nodes')),
  };
}

function fence(sql: Sql, leases: string, lease: LeaseToken): string {
  return `EXISTS (SELECT 1 FROM ${leases} WHERE outbox = ${sql.param(lease.outbox)} AND partition = ${sql.param(lease.partition)} AND owner = ${sql.param(lease.owner)} AND epoch = ${sql.param(lease.epoch)})`;
}

/**
 * Up to this many rows, an insert lists them in `VALUES` (six parameters a row): SQLite
 * parses no JSON then, and a prepared statement per row count is cached by the adapter. Above it,
 * one JSON parameter read with `json_each`, whatever the count.
 */
const VALUES_ROWS = 200;

const INSERT_COLUMNS = `(outbox, partition, group_key, type, payload, headers)`;

/**
 * The text of a `VALUES` insert of `count` rows, kept: the same string each time, so the
 * adapter's statement cache finds it without hashing 3.6 kB of text per publish.
 */
const valuesInserts = new Map<string, string>();
function valuesInsert(table: string, count: number): string {
  const key = `${count} ${table}`;
  let text = valuesInserts.get(key);
  if (text === undefined) {
    const rows = Array.from({ length: count }, () => '(?, ?, ?, ?, ?, ?)').join(', ');
    text = `INSERT INTO ${table} ${INSERT_COLUMNS} VALUES ${rows} RETURNING id`;
    valuesInserts.set(key, text);
  }
  return text;
}

function insert(table: QualifiedName, rows: readonly InsertRow[]): SqlQuery {
  const t = quoteName(table);
  if (rows.length <= VALUES_ROWS) {
    // Rows are inserted in the order listed, so ids come in the order given.
    const values = new Array<unknown>(rows.length * 6);
    rows.forEach((r, i) => {
      values[i * 6] = r.outbox;
      values[i * 6 + 1] = r.partition;
      values[i * 6 + 2] = r.groupKey;
      values[i * 6 + 3] = r.type;
      values[i * 6 + 4] = r.payload;
      values[i * 6 + 5] = r.headers;
    });
    return { text: valuesInsert(t, rows.length), values };
  }
  // One parameter whatever the row count; ORDER BY key keeps ids in the order given.
  const data = rows.map((r) => [r.outbox, r.partition, r.groupKey, r.type, r.payload, r.headers]);
  return {
    text: `INSERT INTO ${t} ${INSERT_COLUMNS}
SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5 FROM json_each(?) ORDER BY key
RETURNING id`,
    values: [JSON.stringify(data)],
  };
}

function dueMillis(dueBefore: PollParams['dueBefore']): number {
  if (dueBefore === 'infinity') return Number.MAX_SAFE_INTEGER;
  return (dueBefore ?? new Date()).getTime();
}

function poll(table: QualifiedName, params: PollParams): SqlQuery {
  const { messages } = tables(table);
  const { lease } = params;
  const sql = new Sql();
  const due = dueMillis(params.dueBefore);
  if (params.ordering === 'total') {
    return sql.query(`WITH head AS (
  SELECT id, next_attempt_at FROM ${messages} WHERE outbox = ${sql.param(lease.outbox)} AND partition = ${sql.param(lease.partition)} AND status ${blocking(params.parkDead)} ORDER BY id LIMIT 1
)
SELECT * FROM (
  SELECT ${COLUMNS}, 0 AS blocked FROM ${messages} WHERE id = (SELECT id FROM head WHERE next_attempt_at <= ${sql.param(due)})
  UNION ALL
  SELECT * FROM (SELECT ${COLUMNS}, 0 AS blocked FROM ${messages}
    WHERE NOT EXISTS (SELECT 1 FROM head) AND outbox = ${sql.param(lease.outbox)} AND partition = ${sql.param(lease.partition)} AND status = 0 AND id > ${sql.param(params.afterId)}
    ORDER BY id LIMIT ${sql.param(params.limit)})
) ORDER BY id`);
  }
  const retries = `SELECT * FROM (SELECT ${COLUMNS}, 0 AS blocked FROM ${messages}
    WHERE outbox = ${sql.param(lease.outbox)} AND partition = ${sql.param(lease.partition)} AND status = 1 AND next_attempt_at <= ${sql.param(due)}
    ORDER BY next_attempt_at LIMIT ${sql.param(params.limit)})`;
  const blocked =
    params.ordering === 'group'
      ? `(m.group_key IS NOT NULL AND EXISTS (SELECT 1 FROM ${messages} h WHERE h.outbox = m.outbox AND h.group_key = m.group_key AND ${blockingStatus(params.parkDead, 'h.status')}))`
      : '0';
  const ready = `SELECT * FROM (SELECT ${COLUMNS.split(', ')
    .map((c) => `m.${c}`)
    .join(', ')}, ${blocked} AS blocked FROM ${messages} m
    WHERE m.outbox = ${sql.param(lease.outbox)} AND m.partition = ${sql.param(lease.partition)} AND m.status = 0 AND m.id > ${sql.param(params.afterId)}
    ORDER BY m.id LIMIT ${sql.param(params.limit)})`;
  // Unsorted, as on Postgres: the engine orders the rows by id, and a sort of the union here
  // costs SQLite two temporary B-trees a poll (8% of the poll's time at batch 100).
  return sql.query(`${retries} UNION ALL ${ready}`);
}

function hold(
  table: QualifiedName,
  lease: LeaseToken,
  ids: readonly number[],
  _groups: readonly string[],
  parkDead: boolean,
): SqlQuery {
  const { messages, leases } = tables(table);
  const sql = new Sql();
  return sql.query(`UPDATE ${messages} AS m SET status = 2
WHERE id IN (SELECT value FROM json_each(${sql.json(ids)})) AND status = 0
  AND EXISTS (SELECT 1 FROM ${messages} h WHERE h.outbox = m.outbox AND h.group_key = m.group_key AND ${blockingStatus(parkDead, 'h.status')})
  AND ${fence(sql, leases, lease)}
RETURNING id`);
}

function nextRetryAt(table: QualifiedName, outbox: string, partition: number): SqlQuery {
  const { messages } = tables(table);
  return {
    text: `SELECT min(next_attempt_at) AS next_attempt_at FROM ${messages} WHERE outbox = ? AND partition = ? AND status = 1`,
    values: [outbox, partition],
  };
}

function settle(table: QualifiedName, params: SettleParams): SqlQuery[] {
  const { messages, leases } = tables(table);
  const { lease } = params;
  const now = Date.now();
  const statements: SqlQuery[] = [renewLease(table, lease, params.ttl)];
  if (params.delivered.length > 0) {
    // Placeholders are bound in text order: build each fragment in the order it appears.
    const sql = new Sql();
    statements.push(
      params.keep
        ? sql.query(
            `UPDATE ${messages} SET status = 4, delivered_at = ${sql.param(now)}, next_attempt_at = NULL WHERE id IN (SELECT value FROM json_each(${sql.json(params.delivered)})) AND status < 3 AND ${fence(sql, leases, lease)}`,
          )
        : sql.query(
            `DELETE FROM ${messages} WHERE id IN (SELECT value FROM json_each(${sql.json(params.delivered)})) AND ${fence(sql, leases, lease)}`,
          ),
    );
  }
  if (params.failed.length > 0) {
    const sql = new Sql();
    const text = `UPDATE ${messages} AS m SET attempts = m.attempts + 1, last_error = f.error,
  status = CASE WHEN f.dead THEN 3 ELSE 1 END,
  next_attempt_at = CASE WHEN f.dead THEN NULL ELSE ${sql.param(now)} + f.delay END,
  failing_since = coalesce(m.failing_since, ${sql.param(now)})
FROM (SELECT value ->> 'id' AS id, value ->> 'error' AS error, value ->> 'dead' AS dead, value ->> 'delay' AS delay FROM json_each(${sql.json(params.failed.map(({ id, error, dead, delay }) => ({ id, error, dead, delay })))})) AS f
WHERE m.id = f.id AND m.status < 3 AND ${fence(sql, leases, lease)}`;
    statements.push(sql.query(text));
  }
  if (params.unblockedGroups.length > 0) {
    statements.push(unhold(messages, lease.outbox, params.unblockedGroups, params.parkDead));
  }
  return statements;
}

function unhold(
  messages: string,
  outbox: string,
  groups: readonly string[] | undefined,
  parkDead: boolean,
): SqlQuery {
  const sql = new Sql();
  const groupFilter =
    groups === undefined ? '' : `AND m.group_key IN (SELECT value FROM json_each(${sql.json(groups)}))`;
  const text = `UPDATE ${messages} AS m SET status = 0
WHERE m.status = 2 ${groupFilter} AND m.outbox = ${sql.param(outbox)}
  AND NOT EXISTS (SELECT 1 FROM ${messages} h WHERE h.outbox = m.outbox AND h.group_key = m.group_key AND ${blockingStatus(parkDead, 'h.status')})
RETURNING id`;
  return sql.query(text);
}

function acquireLease(table: QualifiedName, p: AcquireParams): SqlQuery {
  const { leases } = tables(table);
  const now = Date.now();
  return {
    text: `INSERT INTO ${leases} (outbox, partition, owner, epoch, lease_until) VALUES (?, ?, ?, 1, ?)
ON CONFLICT (outbox, partition) DO UPDATE
  SET owner = excluded.owner, epoch = epoch + 1, lease_until = excluded.lease_until
  WHERE lease_until < ? OR owner = excluded.owner
RETURNING epoch`,
    values: [p.outbox, p.partition, p.owner, now + p.ttl, now],
  };
}

function leaseWhere(lease: LeaseToken): { text: string; values: unknown[] } {
  return {
    text: `WHERE outbox = ? AND partition = ? AND owner = ? AND epoch = ?`,
    values: [lease.outbox, lease.partition, lease.owner, lease.epoch],
  };
}

function renewLease(table: QualifiedName, lease: LeaseToken, ttl: number): SqlQuery {
  const where = leaseWhere(lease);
  return {
    text: `UPDATE ${tables(table).leases} SET lease_until = ? ${where.text} RETURNING epoch`,
    values: [Date.now() + ttl, ...where.values],
  };
}

function releaseLease(table: QualifiedName, lease: LeaseToken): SqlQuery {
  const where = leaseWhere(lease);
  return {
    text: `UPDATE ${tables(table).leases} SET lease_until = 0 ${where.text} RETURNING epoch`,
    values: where.values,
  };
}

function heartbeat(table: QualifiedName, outbox: string, nodeId: string, ttl: number): SqlQuery[] {
  const { nodes, leases } = tables(table);
  const now = Date.now();
  return [
    {
      text: `INSERT INTO ${nodes} (outbox, node_id, last_seen) VALUES (?, ?, ?) ON CONFLICT (outbox, node_id) DO UPDATE SET last_seen = excluded.last_seen`,
      values: [outbox, nodeId, now],
    },
    { text: `DELETE FROM ${nodes} WHERE outbox = ? AND last_seen < ?`, values: [outbox, now - 10 * ttl] },
    {
      text: `SELECT (SELECT count(*) FROM ${nodes} WHERE outbox = ? AND last_seen > ?) AS live_nodes,
  coalesce((SELECT json_group_array(json_object('partition', partition, 'owner', owner)) FROM ${leases} WHERE outbox = ? AND lease_until >= ?), '[]') AS leases`,
      values: [outbox, now - ttl, outbox, now],
    },
  ];
}

function removeNode(table: QualifiedName, outbox: string, nodeId: string): SqlQuery {
  return {
    text: `DELETE FROM ${tables(table).nodes} WHERE outbox = ? AND node_id = ?`,
    values: [outbox, nodeId],
  };
}

function counts(table: QualifiedName, outbox: string, partitions: number, upTo?: number): SqlQuery {
  const { messages, nodes } = tables(table);
  if (upTo !== undefined) {
    // Each status counted from its own index, stopping after `upTo` rows.
    const count = (where: string) =>
      `(SELECT count(*) FROM (SELECT 1 FROM ${messages} WHERE outbox = ? AND ${where} LIMIT ?))`;
    return {
      text: `SELECT ${count('status < 3')} AS pending, ${count('status = 4')} AS delivered, ${count('status = 3')} AS dead,
  ${count('status < 3 AND partition >= ?')} AS orphaned,
  (SELECT inserted_at FROM ${messages} WHERE outbox = ? AND status < 3 ORDER BY id LIMIT 1) AS oldest_pending_at,
  (SELECT max(last_seen) FROM ${nodes} WHERE outbox = ?) AS relay_seen_at`,
      values: [...[outbox, upTo, outbox, upTo, outbox, upTo, outbox, partitions, upTo], outbox, outbox],
    };
  }
  return {
    text: `SELECT count(*) FILTER (WHERE status < 3) AS pending, count(*) FILTER (WHERE status = 4) AS delivered,
  count(*) FILTER (WHERE status = 3) AS dead, min(inserted_at) FILTER (WHERE status < 3) AS oldest_pending_at, count(*) FILTER (WHERE status < 3 AND partition >= ?) AS orphaned,
  (SELECT max(last_seen) FROM ${nodes} WHERE outbox = ?) AS relay_seen_at
FROM ${messages} WHERE outbox = ?`,
    values: [partitions, outbox, outbox],
  };
}

function readConfiguration(table: QualifiedName, outbox: string): SqlQuery {
  return {
    text: `SELECT partitions, ordering, serialize_writes, on_dead FROM ${quoteName(companion(table, 'config'))} WHERE outbox = ?`,
    values: [outbox],
  };
}

function writeConfiguration(
  table: QualifiedName,
  outbox: string,
  c: RecordedConfiguration,
  onlyIfAbsent = false,
): SqlQuery {
  const conflict = onlyIfAbsent
    ? 'DO NOTHING'
    : 'DO UPDATE SET partitions = excluded.partitions, ordering = excluded.ordering, serialize_writes = excluded.serialize_writes, on_dead = excluded.on_dead, updated_at = excluded.updated_at';
  return {
    text: `INSERT INTO ${quoteName(companion(table, 'config'))} (outbox, partitions, ordering, serialize_writes, on_dead, updated_at) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (outbox) ${conflict}`,
    values: [outbox, c.partitions, c.ordering, c.serializeWrites ? 1 : 0, c.onDead, Date.now()],
  };
}

function list(table: QualifiedName, outbox: string, which: 'pending' | 'dead', limit: number): SqlQuery {
  const filter = which === 'pending' ? 'status < 3' : 'status = 3';
  return {
    text: `SELECT ${COLUMNS}, 0 AS blocked FROM ${tables(table).messages} WHERE outbox = ? AND ${filter} ORDER BY id LIMIT ?`,
    values: [outbox, limit],
  };
}

function retryDead(
  table: QualifiedName,
  outbox: string,
  ids: readonly number[] | undefined,
  parkDead: boolean,
): SqlQuery {
  const sql = new Sql();
  const status = parkDead ? 'CASE WHEN group_key IS NULL THEN 0 ELSE 1 END' : '0';
  const next = parkDead ? `CASE WHEN group_key IS NULL THEN NULL ELSE ${sql.param(Date.now())} END` : 'NULL';
  const idFilter = ids === undefined ? '' : `AND id IN (SELECT value FROM json_each(${sql.json(ids)}))`;
  return sql.query(
    `UPDATE ${tables(table).messages} SET status = ${status}, attempts = 0, next_attempt_at = ${next}, failing_since = NULL WHERE status = 3 ${idFilter} AND outbox = ${sql.param(outbox)} RETURNING id`,
  );
}

function blockedGroups(table: QualifiedName, outbox: string, limit: number, parkDead: boolean): SqlQuery {
  const { messages } = tables(table);
  return {
    text: `SELECT h.group_key, h.id, h.status, h.attempts, h.last_error, h.next_attempt_at, h.failing_since,
  (SELECT count(*) FROM ${messages} w WHERE w.outbox = h.outbox AND w.group_key = h.group_key AND w.status IN (0, 2) AND w.id > h.id) AS waiting
FROM ${messages} h WHERE h.outbox = ? AND h.group_key IS NOT NULL AND h.status ${blocking(parkDead)}
ORDER BY h.id LIMIT ?`,
    values: [outbox, limit],
  };
}

function discard(table: QualifiedName, outbox: string, ids: readonly number[]): SqlQuery {
  return {
    text: `DELETE FROM ${tables(table).messages} WHERE outbox = ? AND id IN (SELECT value FROM json_each(?)) AND status <> 4 RETURNING id`,
    values: [outbox, JSON.stringify(ids)],
  };
}

function prune(table: QualifiedName, outbox: string, olderThanSeconds: number, limit: number): SqlQuery[] {
  const { messages } = tables(table);
  return [
    {
      text: `DELETE FROM ${messages} WHERE id IN (SELECT id FROM ${messages} WHERE outbox = ? AND status = 4 AND delivered_at < ? ORDER BY delivered_at LIMIT ?)`,
      values: [outbox, Date.now() - olderThanSeconds * 1000, limit],
    },
    { text: `SELECT changes() AS pruned`, values: [] },
  ];
}

export const sqliteDialect: Dialect = Object.freeze({
  name: 'sqlite' as const,
  capabilities: Object.freeze({
    notifications: false,
    advisoryLocks: false,
    concurrentWriters: false,
    pollCursor: false,
    rejectsNulCharacters: false,
  }),
  schema: sqliteSchema,
  // The migration runs in a BEGIN IMMEDIATE transaction, which already excludes other writers.
  migrationLock: () => [],
  insert,
  poll,
  hold,
  nextRetryAt,
  settle,
  acquireLease,
  renewLease,
  releaseLease,
  heartbeat,
  removeNode,
  counts,
  readConfiguration,
  writeConfiguration,
  // 3.42: unixepoch('subsec'); 3.38: ->> on JSON; 3.35: RETURNING.
  serverVersion: () => ({
    text: `SELECT CAST(substr(v, 1, instr(v, '.') - 1) AS INTEGER) * 1000000 + CAST(substr(r, 1, instr(r, '.') - 1) AS INTEGER) * 1000 + CAST(substr(r, instr(r, '.') + 1) AS INTEGER) AS version
FROM (SELECT sqlite_version() || '.0' AS v, substr(sqlite_version() || '.0', instr(sqlite_version(), '.') + 1) AS r)`,
    values: [],
  }),
  minimumVersion: { number: 3_042_000, name: 'SQLite 3.42' },
  list,
  retryDead,
  discard,
  releaseOrphanedHolds: (table: QualifiedName, outbox: string, parkDead: boolean) =>
    unhold(quoteName(table), outbox, undefined, parkDead),
  blockedGroups,
  prune,
  toEnvelope: readEnvelope,
  missingSchemaObject: (message: string) =>
    /no such table: (\S+)/.exec(message)?.[1] ??
    /table (\S+ has no column named \S+)/.exec(message)?.[1] ??
    /no such column: (\S+)/.exec(message)?.[1],
});
