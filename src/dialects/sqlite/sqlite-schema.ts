import { checkedName, companion, type QualifiedName } from '../../core/identifiers.js';

/**
 * The DDL of one message table and its companions on SQLite, idempotent; the same layout and
 * partial indexes as Postgres (see postgres-schema.ts). AUTOINCREMENT keeps ids increasing even
 * after the table was emptied, which a plain rowid does not.
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
  ];
}
