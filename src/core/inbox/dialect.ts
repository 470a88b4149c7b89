/**
 * What the inbox needs of a dialect: its tables, the statement (or batch) that records a message as
 * handled (the deduplication itself), the one that keeps each group's highest sequence (order at
 * the consumer), the savepoint that makes record and effect one unit, and pruning.
 */
import type { QualifiedName } from '../identifiers.js';
import type { SqlQuery, Statement, Statements } from '../sql.js';

/** The identity of a received message in one inbox. */
export interface InboxKey {
  readonly inbox: string;
  /** Who sent it (a topic, a queue, a producer's outbox); '' when the ids are unique on their own. */
  readonly source: string;
  readonly messageId: string;
}

export interface InboxRecord extends InboxKey {
  readonly groupKey: string | null;
}

/** A handled message's place in its group at the producer: `sequence` is a decimal integer text. */
export interface InboxGroupPosition {
  readonly inbox: string;
  readonly source: string;
  readonly groupKey: string;
  readonly sequence: string;
}

/** What {@link InboxDialect.recordAndAdvance} did. */
export interface RecordedPosition {
  readonly recorded: boolean;
  /** The group's highest sequence after the advance, as decimal text; undefined when not recorded. */
  readonly highest: string | undefined;
}

export interface InboxDialect {
  /**
   * The inbox table, its companion `<table>_groups` (each group's highest sequence) and their
   * indexes, idempotent (`IF NOT EXISTS`).
   */
  inboxSchema(table: QualifiedName): string[];
  /**
   * Records the message as handled; true when this call recorded it, false when it was already
   * there. On Postgres and MySQL a concurrent transaction holding the same key makes this wait for
   * it to end. A batch (MySQL) runs statement by statement in the caller's transaction.
   */
  recordHandled(table: QualifiedName, record: InboxRecord, now: number): Statements<boolean>;
  /** When a recorded message was handled (Unix ms), or undefined when it is not recorded. */
  handledAt(table: QualifiedName, key: InboxKey): Statement<number | undefined>;
  /**
   * Raises the group's highest handled sequence to `position.sequence` when it is lower (creating
   * the group's row), and returns the highest after it, as decimal text. It takes the group's row
   * lock until the transaction ends: concurrent handles of one group queue up, other groups do not.
   */
  advanceGroup(table: QualifiedName, position: InboxGroupPosition, now: number): Statements<string>;
  /**
   * Optional: {@link recordHandled}, then {@link advanceGroup} only when it recorded the message,
   * in one statement, taking the same locks in the same order: an ordered message costs one round
   * trip less. `highest` is undefined when the message was already recorded (the group is then
   * left alone). Without it, the inbox sends the two statements.
   */
  recordAndAdvance?(
    table: QualifiedName,
    record: InboxRecord,
    position: InboxGroupPosition,
    now: number,
  ): Statements<RecordedPosition>;
  /** Deletes at most `limit` records of `inbox` handled before `before` (Unix ms); how many. */
  pruneHandled(table: QualifiedName, inbox: string, before: number, limit: number): Statements<number>;
  /** Deletes at most `limit` group rows of `inbox` last advanced before `before` (Unix ms); how many. */
  pruneGroups(table: QualifiedName, inbox: string, before: number, limit: number): Statements<number>;
  savepoint(name: string): SqlQuery;
  releaseSavepoint(name: string): SqlQuery;
  rollbackToSavepoint(name: string): SqlQuery;
}
