import type { InboxDialect, InboxGroupPosition, InboxKey, InboxRecord } from '../../core/inbox/dialect.js';
import { companion, quoteMysqlName, type QualifiedName } from '../../core/identifiers.js';
import { batch, type Batch } from '../../core/sql.js';
import { Parameters } from '../shared/parameters.js';
import { savepointStatements } from '../shared/savepoints.js';
import { NOW_MS } from './shared.js';

/**
 * The inbox on MySQL 8 and MariaDB 10.6+: one row per handled message, keyed by (inbox, source,
 * message_id), handled_at in Unix milliseconds of the server's clock (as the message table's
 * times). The primary key is the deduplication: a second INSERT of the key finds the row, and one
 * from a concurrent transaction waits on the first's row lock until it commits (then finds the
 * row) or rolls back (then inserts).
 *
 * Key lengths: InnoDB keys hold at most 3072 bytes, 4 a character in utf8mb4, so the primary key's
 * columns are 100 + 255 + 400 characters (3020 bytes). The core refuses a longer id or source
 * before any SQL (src/core/inbox/inbox.ts), on every database alike.
 *
 * Without `RETURNING` or `ON CONFLICT DO NOTHING`, and without `INSERT IGNORE` (which also turns
 * a too-long id into a truncated one), `recordHandled` is a batch: `INSERT … ON DUPLICATE KEY
 * UPDATE` whose update changes nothing but sets `LAST_INSERT_ID(1)`, then a read of it. The
 * affected-row count cannot tell the two apart: with the client flag FOUND_ROWS (mysql2's
 * default), a duplicate left as it was counts 1, as an insert does.
 *
 * `<table>_groups` keeps one row per (inbox, source, group_key): the highest sequence handled. Its
 * group_key is VARBINARY(512), the group key's limit in bytes (the core checks it), so the key is
 * 400 + 1020 + 512 bytes where a utf8mb4 column would pass InnoDB's 3072.
 */

function inboxSchema(table: QualifiedName): string[] {
  const handled = `\`${table.name}_handled_idx\``;
  return [
    // The index on (inbox, handled_at) is what pruning reads, oldest first.
    `CREATE TABLE IF NOT EXISTS ${quoteMysqlName(table)} (
  inbox VARCHAR(100) NOT NULL,
  source VARCHAR(255) NOT NULL,
  message_id VARCHAR(400) NOT NULL,
  group_key VARCHAR(512) NULL,
  handled_at BIGINT NOT NULL,
  PRIMARY KEY (inbox, source, message_id),
  KEY ${handled} (inbox, handled_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
    `CREATE TABLE IF NOT EXISTS ${quoteMysqlName(companion(table, 'groups'))} (
  inbox VARCHAR(100) NOT NULL,
  source VARCHAR(255) NOT NULL,
  group_key VARBINARY(512) NOT NULL,
  highest BIGINT NOT NULL,
  handled_at BIGINT NOT NULL,
  PRIMARY KEY (inbox, source, group_key),
  KEY \`${table.name}_groups_idx\` (inbox, handled_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
  ];
}

/**
 * An upsert that raises the group's highest sequence (the duplicate key takes the row's exclusive
 * lock: a concurrent handle of the group waits for this transaction), then a locking read of it:
 * a plain read in REPEATABLE READ could miss a row another transaction committed after this one's
 * snapshot when the update changed nothing.
 */
function advanceGroup(table: QualifiedName, position: InboxGroupPosition): Batch<string> {
  const groups = quoteMysqlName(companion(table, 'groups'));
  const p = Parameters.positional();
  const upsert = p.query(
    `INSERT INTO ${groups} (inbox, source, group_key, highest, handled_at) VALUES (${p.add(position.inbox)}, ${p.add(position.source)}, ${p.add(position.groupKey)}, CAST(${p.add(position.sequence)} AS SIGNED), ${NOW_MS})
ON DUPLICATE KEY UPDATE highest = GREATEST(highest, CAST(${p.add(position.sequence)} AS SIGNED)), handled_at = ${NOW_MS}`,
  );
  const r = Parameters.positional();
  const read = r.query(
    `SELECT CAST(highest AS CHAR) AS highest FROM ${groups} WHERE inbox = ${r.add(position.inbox)} AND source = ${r.add(position.source)} AND group_key = ${r.add(position.groupKey)} FOR UPDATE`,
  );
  return batch([upsert, read], (results) => String(results[results.length - 1]?.[0]?.highest));
}

/**
 * Three statements run one after another in the caller's transaction: clear `LAST_INSERT_ID`,
 * insert (or, on the duplicate key, set `LAST_INSERT_ID(1)` and leave the row as it is), read it.
 * The INSERT takes the key's row lock either way: a concurrent handle of the same message waits.
 */
function recordHandled(table: QualifiedName, record: InboxRecord): Batch<boolean> {
  const p = Parameters.positional();
  return batch(
    [
      { text: `SELECT LAST_INSERT_ID(0) AS cleared`, values: [] },
      p.query(
        `INSERT INTO ${quoteMysqlName(table)} (inbox, source, message_id, group_key, handled_at) VALUES (${p.add(record.inbox)}, ${p.add(record.source)}, ${p.add(record.messageId)}, ${p.add(record.groupKey)}, ${NOW_MS})
ON DUPLICATE KEY UPDATE inbox = IF(LAST_INSERT_ID(1) = 1, inbox, inbox)`,
      ),
      { text: `SELECT LAST_INSERT_ID() AS duplicate`, values: [] },
    ],
    (results) => Number(results[results.length - 1]?.[0]?.duplicate ?? 1) === 0,
  );
}

function handledAt(table: QualifiedName, key: InboxKey) {
  const p = Parameters.positional();
  return p.statement(
    `SELECT handled_at FROM ${quoteMysqlName(table)} WHERE inbox = ${p.add(key.inbox)} AND source = ${p.add(key.source)} AND message_id = ${p.add(key.messageId)}`,
    (rows) => (rows[0] === undefined ? undefined : Number(rows[0].handled_at)),
  );
}

/**
 * One bounded DELETE, oldest first along `_handled_idx` (inbox, handled_at), then its row count,
 * in one transaction. A second pruner waits on the first's row locks, then deletes what is left.
 */
function pruneHandled(table: QualifiedName, inbox: string, before: number, limit: number): Batch<number> {
  return pruneOlder(quoteMysqlName(table), inbox, before, limit);
}

function pruneGroups(table: QualifiedName, inbox: string, before: number, limit: number): Batch<number> {
  return pruneOlder(quoteMysqlName(companion(table, 'groups')), inbox, before, limit);
}

function pruneOlder(quoted: string, inbox: string, before: number, limit: number): Batch<number> {
  const p = Parameters.positional();
  return batch(
    [
      p.query(
        `DELETE FROM ${quoted} WHERE inbox = ${p.add(inbox)} AND handled_at < ${p.add(before)} ORDER BY handled_at LIMIT ${p.add(limit)}`,
      ),
      { text: `SELECT ROW_COUNT() AS pruned`, values: [] },
    ],
    (results) => Number(results[results.length - 1]?.[0]?.pruned ?? 0),
  );
}

export const mysqlInbox: InboxDialect = Object.freeze({
  inboxSchema,
  recordHandled,
  handledAt,
  advanceGroup,
  pruneHandled,
  pruneGroups,
  ...savepointStatements,
});
