/**
 * The reads the CLI needs that the engine does not: which outboxes a table records, whether an
 * outbox has any row, and whether it parks groups behind dead messages. All read-only; the same
 * SQL on both dialects but for the placeholder. Everything else goes through the public API of
 * `Outboxer`.
 */
import type { Dialect, SqlQuery } from '../core/database.js';
import { companion, quoteName, type QualifiedName } from '../core/identifiers.js';

/** Rows of `<table>_config` (`outbox` and the configuration's columns): outboxes a relaying node started. */
export function recordedOutboxes(table: QualifiedName): SqlQuery {
  return {
    text: `SELECT outbox, partitions, ordering, serialize_writes, on_dead FROM ${quoteName(companion(table, 'config'))} ORDER BY outbox`,
    values: [],
  };
}

/** One row when the outbox has a message, none otherwise. Stops at the first row. */
export function outboxHasRows(dialect: Dialect, table: QualifiedName, outbox: string): SqlQuery {
  const placeholder = dialect.name === 'postgres' ? '$1' : '?';
  return {
    text: `SELECT 1 AS found FROM ${quoteName(table)} WHERE outbox = ${placeholder} LIMIT 1`,
    values: [outbox],
  };
}

/**
 * One row when a message is held although no message of its group is retrying: it waits behind a
 * dead one, which only `onDead: 'park'` does. Reads the `_held` index, probing `_blocking` per row.
 */
export function parkedMessage(dialect: Dialect, table: QualifiedName, outbox: string): SqlQuery {
  const t = quoteName(table);
  const placeholder = dialect.name === 'postgres' ? '$1' : '?';
  return {
    text: `SELECT 1 AS found FROM ${t} h WHERE h.outbox = ${placeholder} AND h.status = 2 AND h.group_key IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM ${t} r WHERE r.outbox = h.outbox AND r.group_key = h.group_key AND r.status = 1) LIMIT 1`,
    values: [outbox],
  };
}
