import type { InboxDialect, InboxGroupPosition, InboxKey, InboxRecord } from '../../core/inbox/dialect.js';
import { companion, quoteName, type QualifiedName } from '../../core/identifiers.js';
import type { Statement } from '../../core/sql.js';
import { Parameters } from '../shared/parameters.js';
import { savepointStatements } from '../shared/savepoints.js';

/**
 * The inbox on SQLite: one row per handled message, keyed by (inbox, source, message_id), with the
 * time it was handled in Unix milliseconds from the process clock (SQLite has one writer at a
 * time, so a duplicate never races). Pruning reads the index on (inbox, handled_at).
 *
 * `<table>_groups` keeps one row per (inbox, source, group_key): the highest sequence handled,
 * raised by an upsert. Sequences travel as decimal text and are cast to INTEGER (64-bit) in SQL,
 * and read back as text: a JavaScript number loses precision above 2^53.
 */

function inboxSchema(table: QualifiedName): string[] {
  const inbox = quoteName(table);
  const groups = quoteName(companion(table, 'groups'));
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
    `CREATE TABLE IF NOT EXISTS ${groups} (
  inbox TEXT NOT NULL,
  source TEXT NOT NULL,
  group_key TEXT NOT NULL,
  highest INTEGER NOT NULL,
  handled_at INTEGER NOT NULL,
  PRIMARY KEY (inbox, source, group_key)
) WITHOUT ROWID`,
    `CREATE INDEX IF NOT EXISTS ${quoteName(companion(table, 'groups_idx'))} ON ${groups} (inbox, handled_at)`,
  ];
}

function advanceGroup(table: QualifiedName, position: InboxGroupPosition, now: number): Statement<string> {
  const p = Parameters.positional();
  return p.statement(
    `INSERT INTO ${quoteName(companion(table, 'groups'))} (inbox, source, group_key, highest, handled_at) VALUES (${p.add(position.inbox)}, ${p.add(position.source)}, ${p.add(position.groupKey)}, CAST(${p.add(position.sequence)} AS INTEGER), ${p.add(now)})
ON CONFLICT (inbox, source, group_key) DO UPDATE SET highest = max(highest, excluded.highest), handled_at = excluded.handled_at
RETURNING CAST(highest AS TEXT) AS highest`,
    (rows) => String(rows[0]?.highest),
  );
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
  return pruneOlder(quoteName(table), 'message_id', inbox, before, limit);
}

function pruneGroups(table: QualifiedName, inbox: string, before: number, limit: number): Statement<number> {
  return pruneOlder(quoteName(companion(table, 'groups')), 'group_key', inbox, before, limit);
}

/** `key` is the last column of the table's primary key, a constant of this file. */
function pruneOlder(
  quoted: string,
  key: 'message_id' | 'group_key',
  inbox: string,
  before: number,
  limit: number,
): Statement<number> {
  const p = Parameters.positional();
  return p.statement(
    `DELETE FROM ${quoted} WHERE (inbox, source, ${key}) IN (SELECT inbox, source, ${key} FROM ${quoted} WHERE inbox = ${p.add(inbox)} AND handled_at < ${p.add(before)} LIMIT ${p.add(limit)}) RETURNING 1 AS pruned`,
    (rows) => rows.length,
  );
}

export const sqliteInbox: InboxDialect = Object.freeze({
  inboxSchema,
  recordHandled,
  handledAt,
  advanceGroup,
  pruneHandled,
  pruneGroups,
  ...savepointStatements,
});
