/**
 * The reads the CLI needs that the engine does not: which outboxes a table records, whether the
 * table or one of its outboxes has any row, and whether an outbox parks groups behind dead
 * messages. All read-only; the same SQL on both dialects but for the placeholder. Everything else
 * goes through the public API of `Outboxer`.
 */
import type { Dialect } from '../core/dialect.js';
import type { Ordering } from '../core/options.js';
import { statement, Status, type Statement } from '../core/sql.js';
import { companion, quoteName, type QualifiedName } from '../core/identifiers.js';

/** An outbox a relaying node recorded in `<table>_config`, as the CLI needs it. */
export interface RecordedOutbox {
  readonly name: string;
  readonly partitions: number;
  readonly ordering: Ordering;
  readonly onDead: 'continue' | 'park';
}

/** The outboxes relaying nodes recorded in `<table>_config` when they started. */
export function recordedOutboxes(table: QualifiedName): Statement<RecordedOutbox[]> {
  return statement(
    {
      text: `SELECT outbox, partitions, ordering, on_dead FROM ${quoteName(companion(table, 'config'))} ORDER BY outbox`,
      values: [],
    },
    (rows) =>
      rows.map((row) => ({
        name: String(row.outbox),
        partitions: Number(row.partitions),
        ordering: String(row.ordering) as Ordering,
        onDead: row.on_dead === 'park' ? 'park' : 'continue',
      })),
  );
}

/** Whether the table holds any message, of any outbox. Stops at the first row. */
export function tableHasRows(table: QualifiedName): Statement<boolean> {
  return statement(
    { text: `SELECT 1 AS found FROM ${quoteName(table)} LIMIT 1`, values: [] },
    (rows) => rows.length > 0,
  );
}

/** Whether the outbox has any message. Stops at the first row. */
export function outboxHasRows(dialect: Dialect, table: QualifiedName, outbox: string): Statement<boolean> {
  const placeholder = dialect.name === 'postgres' ? '$1' : '?';
  return statement(
    {
      text: `SELECT 1 AS found FROM ${quoteName(table)} WHERE outbox = ${placeholder} LIMIT 1`,
      values: [outbox],
    },
    (rows) => rows.length > 0,
  );
}

/**
 * Whether a message is held although no message of its group is retrying: it waits behind a dead
 * one, which only `onDead: 'park'` does. Reads the `_held` index, probing `_blocking` per row.
 */
export function parkedMessage(dialect: Dialect, table: QualifiedName, outbox: string): Statement<boolean> {
  const t = quoteName(table);
  const placeholder = dialect.name === 'postgres' ? '$1' : '?';
  return statement(
    {
      text: `SELECT 1 AS found FROM ${t} h WHERE h.outbox = ${placeholder} AND h.status = ${Status.held} AND h.group_key IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM ${t} r WHERE r.outbox = h.outbox AND r.group_key = h.group_key AND r.status = ${Status.retry}) LIMIT 1`,
      values: [outbox],
    },
    (rows) => rows.length > 0,
  );
}
