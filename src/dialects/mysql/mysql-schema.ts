import { checkedName, companion, quoteMysqlName, type QualifiedName } from '../../core/identifiers.js';

/**
 * The DDL of one message table and its companions on MySQL 8 and MariaDB 10.6+, idempotent.
 * Exported through `outboxer/mysql2` as {@link mysqlSchema} for users' own migration tools.
 *
 * Each statement is one `CREATE … IF NOT EXISTS` with its indexes inline: DDL commits implicitly
 * in MySQL, so the migration is a sequence of statements each atomic on its own (MySQL 8's atomic
 * DDL; a metadata lock on the table name on both), and two instances migrating at once each either
 * create a table or find it. No lock taken in a transaction would outlive the first CREATE (see
 * `migrationLock` in admin.ts), and none is needed while every statement is idempotent on its own.
 * A later version that must alter a table checks `information_schema` in the same statement.
 *
 * MySQL has no partial indexes: each index leads with the columns a statement fixes (outbox,
 * partition, status) and ends with the one it orders by, so a poll reads one range of one index.
 * InnoDB's delete-marked entries are purged in the background (a long transaction anywhere delays
 * the purge, as it delays vacuum on Postgres). Status: 0 ready, 1 retry, 2 held, 3 dead, 4 delivered.
 *
 * Times are BIGINT Unix milliseconds of the server's clock. Text is utf8mb4 with a binary
 * collation: group keys and outbox names compare byte for byte, as on Postgres.
 */
export function mysqlSchema(unchecked: QualifiedName): string[] {
  const table = checkedName(unchecked);
  const t = quoteMysqlName(table);
  const name = table.name;
  const index = (suffix: string) => `\`${name}_${suffix}\``;
  const companionOf = (suffix: string) => quoteMysqlName(companion(table, suffix));
  const options = 'ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin';
  const schema =
    table.schema === undefined
      ? []
      : [`CREATE DATABASE IF NOT EXISTS \`${table.schema}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`];
  return [
    ...schema,
    `CREATE TABLE IF NOT EXISTS ${t} (
  id BIGINT NOT NULL AUTO_INCREMENT,
  outbox VARCHAR(100) NOT NULL,
  \`partition\` INT NOT NULL,
  group_key VARCHAR(512) NULL,
  type VARCHAR(200) NULL,
  payload LONGTEXT NOT NULL,
  headers LONGTEXT NULL,
  status TINYINT NOT NULL DEFAULT 0,
  attempts INT NOT NULL DEFAULT 0,
  last_error TEXT NULL,
  next_attempt_at BIGINT NULL,
  failing_since BIGINT NULL,
  inserted_at BIGINT NOT NULL,
  delivered_at BIGINT NULL,
  PRIMARY KEY (id),
  KEY ${index('ready')} (outbox, \`partition\`, status, id),
  KEY ${index('retry')} (outbox, \`partition\`, status, next_attempt_at),
  KEY ${index('groups_status')} (outbox, group_key, status),
  KEY ${index('status')} (outbox, status, id),
  KEY ${index('delivered_at')} (outbox, status, delivered_at)
) ${options}`,
    // A lease per outbox and partition; its row lock orders takeovers after settles (leases.ts).
    `CREATE TABLE IF NOT EXISTS ${companionOf('leases')} (
  outbox VARCHAR(100) NOT NULL,
  \`partition\` INT NOT NULL,
  owner VARCHAR(255) NOT NULL,
  epoch BIGINT NOT NULL,
  lease_until BIGINT NOT NULL,
  rewinds BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (outbox, \`partition\`)
) ${options}`,
    `CREATE TABLE IF NOT EXISTS ${companionOf('nodes')} (
  outbox VARCHAR(100) NOT NULL,
  node_id VARCHAR(255) NOT NULL,
  last_seen BIGINT NOT NULL,
  PRIMARY KEY (outbox, node_id)
) ${options}`,
    `CREATE TABLE IF NOT EXISTS ${companionOf('config')} (
  outbox VARCHAR(100) NOT NULL,
  partitions INT NOT NULL,
  ordering VARCHAR(10) NOT NULL,
  serialize_writes TINYINT NOT NULL,
  on_dead VARCHAR(10) NOT NULL DEFAULT 'continue',
  updated_at BIGINT NOT NULL,
  recounted_at BIGINT NOT NULL,
  PRIMARY KEY (outbox)
) ${options}`,
    // Rows of changes to an outbox's figures, inserted (never updated: no counter row for writers
    // to queue on) by the statements that change messages, in their transaction; compacted into one
    // row a partition by the relays. Created with the message table, so it starts out right.
    `CREATE TABLE IF NOT EXISTS ${companionOf('tallies')} (
  id BIGINT NOT NULL AUTO_INCREMENT,
  outbox VARCHAR(100) NOT NULL,
  \`partition\` INT NOT NULL,
  pending BIGINT NOT NULL,
  dead BIGINT NOT NULL,
  delivered BIGINT NOT NULL,
  PRIMARY KEY (id),
  KEY ${index('tallies_outbox')} (outbox, id)
) ${options}`,
    // serializeWrites: a row per group key, locked by each publishing transaction until it ends.
    `CREATE TABLE IF NOT EXISTS ${companionOf('groups')} (
  outbox VARCHAR(100) NOT NULL,
  group_key VARCHAR(512) NOT NULL,
  PRIMARY KEY (outbox, group_key)
) ${options}`,
  ];
}
