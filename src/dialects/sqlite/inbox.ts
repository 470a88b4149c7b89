import type { InboxDialect, InboxKey, InboxRecord } from '../../core/inbox/dialect.js';
import { companion, quoteName, type QualifiedName } from '../../core/identifiers.js';
import type { Statement } from '../../core/sql.js';
import { Parameters } from '../shared/parameters.js';
import { savepointStatements } from '../shared/savepoints.js';

/**
 * The inbox on SQLite: one row per handled message, keyed by (inbox, source, message_id), with the
 * time it was handled in Unix milliseconds from the process clock (SQLite has one writer at a
 * time, so a duplicate never races). Pruning reads the index on (inbox, handled_at).
 */

function inboxSchema(table: QualifiedName): string[] {
  const inbox = quoteName(table);
  return [
    `CREATE TABLE IF NOT EXISTS ${inbox} (
  inbox TEXT NOT NULL,
  source TEXT NOT NULL,
  message_id TEXT NOT NULL,
  group_key TEXT,
  handled_at INTEGER NOT NULL,
  PRIMARY KEY (inbox, source, message_id)
) WITHOUT ROWID`,
    `CREATE INDEX IF NOT EXISTS ${quoteName(companion(table, 'handled_idx'))} ON ${inbox} (inbox, handled_at)`,
  ];
}

function recordHandled(table: QualifiedName, record: InboxRecord, now: number): Statement<boolean> {
  const p = Parameters.positional();
  return p.statement(
    `INSERT INTO ${quoteName(table)} (inbox, source, message_id, group_key, handled_at) VALUES (${p.add(record.inbox)}, ${p.add(record.source)}, ${p.add(record.messageId)}, ${p.add(record.groupKey)}, ${p.add(now)}) ON CONFLICT DO NOTHING RETURNING 1 AS recorded`,
    (rows) => rows.length > 0,
  );
}

function handledAt(table: QualifiedName, key: InboxKey): Statement<number | undefined> {
  const p = Parameters.positional();
  return p.statement(
    `SELECT handled_at FROM ${quoteName(table)} WHERE inbox = ${p.add(key.inbox)} AND source = ${p.add(key.source)} AND message_id = ${p.add(key.messageId)}`,
    (rows) => (rows[0] === undefined ? undefined : Number(rows[0].handled_at)),
  );
}

function pruneHandled(table: QualifiedName, inbox: string, before: number, limit: number): Statement<number> {
  const quoted = quoteName(table);
  const p = Parameters.positional();
  return p.statement(
    `DELETE FROM ${quoted} WHERE (inbox, source, message_id) IN (SELECT inbox, source, message_id FROM ${quoted} WHERE inbox = ${p.add(inbox)} AND handled_at < ${p.add(before)} LIMIT ${p.add(limit)}) RETURNING 1 AS pruned`,
    (rows) => rows.length,
  );
}

export const sqliteInbox: InboxDialect = Object.freeze({
  inboxSchema,
  recordHandled,
  handledAt,
  pruneHandled,
  ...savepointStatements,
});
