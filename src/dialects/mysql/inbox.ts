import type { InboxDialect, InboxKey, InboxRecord } from '../../core/inbox/dialect.js';
import { quoteMysqlName, type QualifiedName } from '../../core/identifiers.js';
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
  ];
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
  const p = Parameters.positional();
  return batch(
    [
      p.query(
        `DELETE FROM ${quoteMysqlName(table)} WHERE inbox = ${p.add(inbox)} AND handled_at < ${p.add(before)} ORDER BY handled_at LIMIT ${p.add(limit)}`,
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
  pruneHandled,
  ...savepointStatements,
});
