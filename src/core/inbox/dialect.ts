/**
 * What the inbox needs of a dialect: its table, the statement (or batch) that records a message as
 * handled (the deduplication itself), the savepoint that makes record and effect one unit, and
 * pruning.
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

export interface InboxDialect {
  /** The inbox table and its index, idempotent (`IF NOT EXISTS`). */
  inboxSchema(table: QualifiedName): string[];
  /**
   * Records the message as handled; true when this call recorded it, false when it was already
   * there. On Postgres and MySQL a concurrent transaction holding the same key makes this wait for
   * it to end. A batch (MySQL) runs statement by statement in the caller's transaction.
   */
  recordHandled(table: QualifiedName, record: InboxRecord, now: number): Statements<boolean>;
  /** When a recorded message was handled (Unix ms), or undefined when it is not recorded. */
  handledAt(table: QualifiedName, key: InboxKey): Statement<number | undefined>;
  /** Deletes at most `limit` records of `inbox` handled before `before` (Unix ms); how many. */
  pruneHandled(table: QualifiedName, inbox: string, before: number, limit: number): Statements<number>;
  savepoint(name: string): SqlQuery;
  releaseSavepoint(name: string): SqlQuery;
  rollbackToSavepoint(name: string): SqlQuery;
}
