import { checkedName, companion, type QualifiedName } from '../../core/identifiers.js';

/**
 * The DDL of one message table and its companions on SQLite, idempotent; the same layout and
 * partial indexes as Postgres (see postgres-schema.ts). AUTOINCREMENT keeps ids increasing even
 * after the table was emptied, which a plain rowid does not.
 *
 * `<table>_tallies` holds what `counts()`, `partitions()` and `blockedGroupCounts()` read: the
 * number of rows per outbox, partition, status and whether they have a group key, kept by
 * triggers on the message table in the statement that changes the rows (so a rolled-back change
 * rolls its tally back, and SQL run by hand is tallied too). SQLite has one writer at a time, so
 * the few tally rows are no point of contention, unlike Postgres, where every change inserts a
 * row of its own (see postgres-schema.ts). Created with the figures of the rows already there.
 */
export function sqliteSchema(unchecked: QualifiedName): string[] {
  const table = checkedName(unchecked);
  // In SQLite the schema (attached database) qualifies the table and index names, not ON targets.
  const prefix = table.schema === undefined ? '' : `"${table.schema}".`;
  const name = table.name;
  const t = `${prefix}"${name}"`;
  const leases = `${prefix}"${companion(table, 'leases').name}"`;
  const nodes = `${prefix}"${companion(table, 'nodes').name}"`;
  const config = `${prefix}"${companion(table, 'config').name}"`;
  const talliesName = companion(table, 'tallies').name;
  const tallies = `${prefix}"${talliesName}"`;
  return [
    `CREATE TABLE IF NOT EXISTS ${t} (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  outbox TEXT NOT NULL,
  partition INTEGER NOT NULL,
  group_key TEXT,
  type TEXT,
  payload TEXT NOT NULL,
  headers TEXT,
  status INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT,
  next_attempt_at INTEGER,
  failing_since INTEGER,
  inserted_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
  delivered_at INTEGER
)`,
    `CREATE INDEX IF NOT EXISTS ${prefix}"${name}_ready" ON "${name}" (outbox, partition, id) WHERE status = 0`,
    `CREATE INDEX IF NOT EXISTS ${prefix}"${name}_retry" ON "${name}" (outbox, partition, next_attempt_at) WHERE status = 1`,
    `CREATE INDEX IF NOT EXISTS ${prefix}"${name}_blocking" ON "${name}" (outbox, group_key) WHERE status IN (1, 3)`,
    `CREATE INDEX IF NOT EXISTS ${prefix}"${name}_held" ON "${name}" (outbox, group_key, id) WHERE status = 2`,
    `CREATE INDEX IF NOT EXISTS ${prefix}"${name}_dead" ON "${name}" (outbox, id) WHERE status = 3`,
    // Prune reads the delivered rows older than the window as a range of this index (see the
    // Postgres schema); its predecessor, on (outbox, id), made every prune walk all rows kept.
    `CREATE INDEX IF NOT EXISTS ${prefix}"${name}_delivered_at" ON "${name}" (outbox, delivered_at) WHERE status = 4`,
    `DROP INDEX IF EXISTS ${prefix}"${name}_delivered"`,
    `CREATE TABLE IF NOT EXISTS ${leases} (
  outbox TEXT NOT NULL,
  partition INTEGER NOT NULL,
  owner TEXT NOT NULL,
  epoch INTEGER NOT NULL,
  lease_until INTEGER NOT NULL,
  PRIMARY KEY (outbox, partition)
)`,
    `CREATE TABLE IF NOT EXISTS ${nodes} (
  outbox TEXT NOT NULL,
  node_id TEXT NOT NULL,
  last_seen INTEGER NOT NULL,
  PRIMARY KEY (outbox, node_id)
)`,
    `CREATE TABLE IF NOT EXISTS ${config} (
  outbox TEXT PRIMARY KEY,
  partitions INTEGER NOT NULL,
  ordering TEXT NOT NULL,
  serialize_writes INTEGER NOT NULL,
  on_dead TEXT NOT NULL DEFAULT 'continue',
  updated_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER))
)`,
    ...tallySchema(prefix, name, t, tallies, talliesName),
  ];
}

/**
 * The tallies and the triggers that keep them. A trigger's body names tables without their schema:
 * SQLite resolves them in the trigger's own database. A tally row is never deleted (it goes to 0),
 * so an empty tally table beside message rows means the tallies were never filled.
 */
function tallySchema(
  prefix: string,
  name: string,
  t: string,
  tallies: string,
  talliesName: string,
): string[] {
  const bare = `"${talliesName}"`;
  // An UPDATE of the row that is almost always there, and an INSERT only when it was not
  // (`changes()` in a trigger counts its own last statement): cheaper than an upsert, which
  // first tries the insert.
  const add = (row: 'NEW' | 'OLD', n: 1 | -1) =>
    `UPDATE ${bare} SET n = n + ${n} WHERE outbox = ${row}.outbox AND partition = ${row}.partition AND status = ${row}.status AND grouped = (${row}.group_key IS NOT NULL);
  INSERT INTO ${bare} (outbox, partition, status, grouped, n) SELECT ${row}.outbox, ${row}.partition, ${row}.status, ${row}.group_key IS NOT NULL, ${n} WHERE changes() = 0;`;
  const trigger = (suffix: string, event: string, body: string) =>
    `CREATE TRIGGER IF NOT EXISTS ${prefix}"${name}_${suffix}" ${event} ON "${name}" FOR EACH ROW${body}`;
  return [
    `CREATE TABLE IF NOT EXISTS ${tallies} (
  outbox TEXT NOT NULL,
  partition INTEGER NOT NULL,
  status INTEGER NOT NULL,
  grouped INTEGER NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (outbox, partition, status, grouped)
) WITHOUT ROWID`,
    // A message table dropped and created again (its triggers went with it): no tally of its old
    // rows may stay. Then the first figures are the table's own.
    `DELETE FROM ${tallies} WHERE NOT EXISTS (SELECT 1 FROM ${t})`,
    `INSERT INTO ${tallies} (outbox, partition, status, grouped, n)
SELECT outbox, partition, status, group_key IS NOT NULL, count(*) FROM ${t}
WHERE NOT EXISTS (SELECT 1 FROM ${tallies}) GROUP BY outbox, partition, status, group_key IS NOT NULL`,
    trigger('tally_insert', 'AFTER INSERT', `\nBEGIN\n  ${add('NEW', 1)}\nEND`),
    trigger('tally_delete', 'AFTER DELETE', `\nBEGIN\n  ${add('OLD', -1)}\nEND`),
    // Only a change of what is tallied: most updates (a lease's attempts, a retry's time) are not.
    trigger(
      'tally_update',
      'AFTER UPDATE OF outbox, partition, status, group_key',
      `
  WHEN OLD.status IS NOT NEW.status OR OLD.partition IS NOT NEW.partition OR OLD.outbox IS NOT NEW.outbox OR (OLD.group_key IS NULL) <> (NEW.group_key IS NULL)
BEGIN
  ${add('OLD', -1)}
  ${add('NEW', 1)}
END`,
    ),
  ];
}
