import type {
  InboxDialect,
  InboxGroupPosition,
  InboxKey,
  InboxRecord,
  RecordedPosition,
} from '../../core/inbox/dialect.js';
import { companion, quoteName, type QualifiedName } from '../../core/identifiers.js';
import type { Statement } from '../../core/sql.js';
import { Parameters } from '../shared/parameters.js';
import { savepointStatements } from '../shared/savepoints.js';

/**
 * The inbox on Postgres: one row per handled message, keyed by (inbox, source, message_id). The
 * primary key is the deduplication: a second INSERT of the key does nothing, and one from a
 * concurrent transaction waits for the first to commit (then does nothing) or roll back (then
 * inserts). Pruning reads the index on (inbox, handled_at).
 *
 * `<table>_groups` keeps one row per (inbox, source, group_key): the highest sequence handled.
 * An upsert raises it and takes that row's lock until the caller's transaction ends, so two
 * consumers of one group queue up (the second sees the first's committed value), and other groups
 * never touch the row.
 */

function inboxSchema(table: QualifiedName): string[] {
  const inbox = quoteName(table);
  const groups = quoteName(companion(table, 'groups'));
  return [
    `CREATE TABLE IF NOT EXISTS ${inbox} (
  inbox text NOT NULL,
  source text NOT NULL,
  message_id text NOT NULL,
  group_key text,
  handled_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (inbox, source, message_id)
)`,
    `CREATE INDEX IF NOT EXISTS ${quoteName(companion(table, 'handled_idx'))} ON ${inbox} (inbox, handled_at)`,
    `CREATE TABLE IF NOT EXISTS ${groups} (
  inbox text NOT NULL,
  source text NOT NULL,
  group_key text NOT NULL,
  highest bigint NOT NULL,
  handled_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (inbox, source, group_key)
)`,
    `CREATE INDEX IF NOT EXISTS ${quoteName(companion(table, 'groups_idx'))} ON ${groups} (inbox, handled_at)`,
  ];
}

/** `ON CONFLICT DO UPDATE` locks the group's row; the row returned is the one after the update. */
function advanceGroup(table: QualifiedName, position: InboxGroupPosition): Statement<string> {
  const p = Parameters.numbered();
  return p.statement(
    `INSERT INTO ${quoteName(companion(table, 'groups'))} AS g (inbox, source, group_key, highest) VALUES (${p.add(position.inbox)}, ${p.add(position.source)}, ${p.add(position.groupKey)}, ${p.add(position.sequence)}::bigint)
ON CONFLICT (inbox, source, group_key) DO UPDATE SET highest = GREATEST(g.highest, EXCLUDED.highest), handled_at = now()
RETURNING g.highest::text AS highest`,
    (rows) => String(rows[0]?.highest),
  );
}

function recordHandled(table: QualifiedName, record: InboxRecord): Statement<boolean> {
  const p = Parameters.numbered();
  return p.statement(`${recordText(table, record, p)} RETURNING 1 AS recorded`, (rows) => rows.length > 0);
}

function recordText(table: QualifiedName, record: InboxRecord, p: Parameters): string {
  return `INSERT INTO ${quoteName(table)} (inbox, source, message_id, group_key) VALUES (${p.add(record.inbox)}, ${p.add(record.source)}, ${p.add(record.messageId)}, ${p.add(record.groupKey)}) ON CONFLICT DO NOTHING`;
}

/**
 * The record's INSERT, then the group's upsert fed by its RETURNING: a duplicate inserts nothing,
 * so the upsert has no row to write and takes no lock. The record's key lock comes first, as with
 * the two statements.
 */
function recordAndAdvance(
  table: QualifiedName,
  record: InboxRecord,
  position: InboxGroupPosition,
): Statement<RecordedPosition> {
  const p = Parameters.numbered();
  const groups = quoteName(companion(table, 'groups'));
  return p.statement(
    `WITH recorded AS (${recordText(table, record, p)} RETURNING 1 AS one
), advanced AS (
  INSERT INTO ${groups} AS g (inbox, source, group_key, highest)
  SELECT ${p.add(position.inbox)}, ${p.add(position.source)}, ${p.add(position.groupKey)}, ${p.add(position.sequence)}::bigint FROM recorded
  ON CONFLICT (inbox, source, group_key) DO UPDATE SET highest = GREATEST(g.highest, EXCLUDED.highest), handled_at = now()
  RETURNING g.highest::text AS highest
)
SELECT EXISTS (SELECT 1 FROM recorded) AS recorded, (SELECT highest FROM advanced) AS highest`,
    (rows) => {
      const row = rows[0];
      const highest = row?.highest;
      return {
        recorded: row?.recorded === true,
        highest: highest === null || highest === undefined ? undefined : String(highest),
      };
    },
  );
}

function handledAt(table: QualifiedName, key: InboxKey): Statement<number | undefined> {
  const p = Parameters.numbered();
  return p.statement(
    `SELECT (extract(epoch FROM handled_at) * 1000)::float8 AS handled_at FROM ${quoteName(table)} WHERE inbox = ${p.add(key.inbox)} AND source = ${p.add(key.source)} AND message_id = ${p.add(key.messageId)}`,
    (rows) => (rows[0] === undefined ? undefined : Number(rows[0].handled_at)),
  );
}

/** SKIP LOCKED: two nodes pruning at once share the work instead of waiting on each other. */
function pruneHandled(table: QualifiedName, inbox: string, before: number, limit: number): Statement<number> {
  return pruneOlder(quoteName(table), inbox, before, limit);
}

function pruneGroups(table: QualifiedName, inbox: string, before: number, limit: number): Statement<number> {
  return pruneOlder(quoteName(companion(table, 'groups')), inbox, before, limit);
}

function pruneOlder(quoted: string, inbox: string, before: number, limit: number): Statement<number> {
  const p = Parameters.numbered();
  return p.statement(
    `WITH old AS (SELECT ctid FROM ${quoted} WHERE inbox = ${p.add(inbox)} AND handled_at < to_timestamp(${p.add(before / 1000)}) LIMIT ${p.add(limit)} FOR UPDATE SKIP LOCKED)
DELETE FROM ${quoted} WHERE ctid IN (SELECT ctid FROM old) RETURNING 1 AS pruned`,
    (rows) => rows.length,
  );
}

export const postgresInbox: InboxDialect = Object.freeze({
  inboxSchema,
  recordHandled,
  handledAt,
  advanceGroup,
  recordAndAdvance,
  pruneHandled,
  pruneGroups,
  ...savepointStatements,
});
