/**
 * The seam between the engine and a database's SQL: what differs between databases, the
 * parameters of each statement family, what each statement's rows mean once read, and the
 * {@link Dialect} that builds them. Nothing here runs SQL; adapters do (database.ts).
 */
import type { DialectAdministration } from './dialect-admin.js';
export type { Heartbeat, HeartbeatOptions, NotifyOnCommit } from './dialect-heartbeat.js';
import type { Heartbeat, HeartbeatOptions, NotifyOnCommit } from './dialect-heartbeat.js';
export type {
  AcknowledgedPoll,
  NextRetry,
  PolledEnvelope,
  PolledMessage,
  PollParams,
  PollResult,
  PollStart,
  PollWatch,
} from './dialect-poll.js';
import type { AcknowledgedPoll, NextRetry, PollParams, PollResult } from './dialect-poll.js';
import type { QualifiedName } from './identifiers.js';
import type { InboxDialect } from './inbox/dialect.js';
import type { Ordering } from './options.js';
import type { Batch, SqlQuery, Statement, Statements } from './sql.js';

export type {
  BlockedCounts,
  BlockedHead,
  CountFigures,
  DialectAdministration,
  FoundMessages,
  MessageFilter,
  NodeRow,
  PartitionRow,
} from './dialect-admin.js';

/** What differs between databases, as capabilities the engine chooses its strategy from. */
export interface DialectCapabilities {
  /** LISTEN/NOTIFY wake-ups. */
  readonly notifications: boolean;
  /** Transaction-scoped locks per group key for `serializeWrites` (Postgres: advisory; MySQL: rows). */
  readonly advisoryLocks: boolean;
  /** Several writers at once: false means writes are serialised already (SQLite). */
  readonly concurrentWriters: boolean;
  /** The database rejects U+0000 in text (Postgres): such values are refused before SQL runs. */
  readonly rejectsNulCharacters: boolean;
  /**
   * Polls start after a cursor (Postgres): deleted rows leave their index entries behind until
   * vacuum, and a poll from the beginning would step over them. The dialect then reports where
   * each poll started and implements {@link Dialect.countRewind}. Without it (SQLite, whose
   * deletes take their index entries with them) every poll starts from the beginning, which costs
   * nothing more and finds at once what other processes made ready below any cursor.
   */
  readonly pollCursor: boolean;
  /**
   * Takes {@link PollParams.readyOnly} (SQLite, whose tallies say on the poll's snapshot whether
   * the outbox has a retrying or blocking message).
   */
  readonly readyOnlyPoll: boolean;
}

export interface InsertRow {
  readonly outbox: string;
  readonly partition: number;
  readonly groupKey: string | null;
  readonly type: string | null;
  /** JSON text. */
  readonly payload: string;
  /** JSON text or null. */
  readonly headers: string | null;
}

export interface InsertOptions {
  /** Take a transaction-scoped lock per group key first (`serializeWrites`). */
  readonly serialize: boolean;
  /**
   * NOTIFY this channel with one payload per partition (`notify`), coalesced: a transaction leaves
   * out a payload that another publishing transaction still in flight will send when it commits,
   * and marks itself as publishing until it ends, so that a relay can tell when it must poll again
   * instead of waiting for a notification (see {@link PollParams.checkPublishers}).
   */
  readonly notify: { readonly channel: string; readonly payloads: readonly string[] } | undefined;
}

/** Ownership a worker holds on a partition; every write of the worker is fenced on it. */
export interface LeaseToken {
  readonly outbox: string;
  readonly partition: number;
  readonly owner: string;
  readonly epoch: number;
}

export interface FailedMessage {
  readonly id: number;
  readonly error: string;
  readonly dead: boolean;
  /** Milliseconds until the next attempt (ignored when dead). */
  readonly delay: number;
}

export interface SettleParams {
  /**
   * The process clock (Unix milliseconds) for dialects that keep time in the rows (SQLite); a
   * dialect whose server has a clock of its own (Postgres) uses that one. Passed in, so that a
   * dialect stays a pure function of its arguments.
   */
  readonly now: number;
  readonly lease: LeaseToken;
  readonly delivered: readonly number[];
  readonly failed: readonly FailedMessage[];
  /** Groups whose blocking head left the retry state in this settle (acknowledged or dead). */
  readonly unblockedGroups: readonly string[];
  readonly keep: boolean;
  /** Lease renewal, milliseconds. */
  readonly ttl: number;
  readonly parkDead: boolean;
}

export interface AcquireParams {
  /**
   * The process clock (Unix milliseconds) for dialects that keep time in the rows (SQLite); a
   * dialect whose server has a clock of its own (Postgres) uses that one. Passed in, so that a
   * dialect stays a pure function of its arguments.
   */
  readonly now: number;
  readonly outbox: string;
  readonly partition: number;
  readonly owner: string;
  readonly ttl: number;
}

/** What every node of an outbox must agree on, recorded in `<table>_config`. */
export interface RecordedConfiguration {
  readonly partitions: number;
  readonly ordering: Ordering;
  readonly serializeWrites: boolean;
  readonly onDead: 'continue' | 'park';
}

export interface SettleResult {
  /** False when the lease was lost: nothing was written. */
  readonly leaseHeld: boolean;
  /** Ids released from `held` because their group was unblocked. */
  readonly released: readonly number[];
}

/** What a recount corrected: rows minus tallies. */
export interface TallyDrift {
  readonly pending: number;
  readonly dead: number;
  readonly delivered: number;
}

/**
 * All the SQL of one database, as pure functions returning statements that carry the readers of
 * their own rows. One implementation per dialect folder; nothing else in the package writes SQL
 * for the engine, and nothing else reads the columns it names.
 */
export interface Dialect extends DialectAdministration {
  readonly name: 'postgres' | 'sqlite' | 'mysql';
  readonly capabilities: DialectCapabilities;
  /**
   * Whether `error` is the database rolling a transaction back to break a deadlock (or a
   * serialization conflict): running the same statements again may succeed. SQLite has none (one
   * writer; a busy database waits in `busy_timeout`).
   */
  isConflict(error: unknown): boolean;
  /** DDL for a message table and its companions, in order; idempotent. */
  schema(table: QualifiedName): string[];
  readonly inbox: InboxDialect; // the inbox's table and statements (core/inbox)
  /** Statements that make concurrent `migrate()` calls wait for each other, run first in the migration transaction. */
  migrationLock(): SqlQuery[];
  /** The ids of the inserted rows, ascending (the order of `rows`); a batch runs statement by statement. */
  insert(table: QualifiedName, rows: readonly InsertRow[], options: InsertOptions): Statements<number[]>;
  poll(table: QualifiedName, params: PollParams): Statement<PollResult>;
  /**
   * Where polls keep a cursor ({@link DialectCapabilities.pollCursor}): counts a rewind on every
   * lease row of an outbox (see {@link PollParams.rewindsSeen}). Run first
   * in the transaction that makes messages ready below the workers' cursors: it locks the lease
   * rows before any message row, the order a worker's settle takes them in.
   */
  countRewind?(table: QualifiedName, outbox: string): Statement<void>;
  /** Moves ready messages of blocked groups out of the poll's way (`held`), re-checking the block; the ids held. */
  hold(
    table: QualifiedName,
    lease: LeaseToken,
    ids: readonly number[],
    groups: readonly string[],
    parkDead: boolean,
  ): Statements<number[]>;
  /** The earliest retry time of a partition, to sleep no longer than needed. */
  nextRetryAt(table: QualifiedName, outbox: string, partition: number): Statement<NextRetry>;
  /**
   * Statements, in one transaction, that acknowledge, retry, dead-letter and unblock, fenced on the
   * lease. A single statement is run on its own, without a transaction around it. An
   * acknowledge-only settle need not wait for its commit to be durable (Postgres commits it
   * asynchronously): a crash that forgets it only delivers its messages again.
   */
  settle(table: QualifiedName, params: SettleParams): Batch<SettleResult>;
  /**
   * Optional, where a round trip costs more than the statement (a server database): an
   * acknowledge-only settle (everything delivered, nothing failed, no group unblocked) and the next
   * poll in one statement. The poll's `exclude` must hold every acknowledged id. The engine also
   * relies on it to poll while a batch is being delivered.
   */
  acknowledgeAndPoll?(
    table: QualifiedName,
    settle: SettleParams,
    poll: PollParams,
  ): Statement<AcknowledgedPoll>;
  /** The new lease's epoch, or `undefined` when another live owner holds the partition. */
  acquireLease(table: QualifiedName, params: AcquireParams): Statements<number | undefined>;
  /**
   * Optional (one statement where the dialect can): {@link acquireLease} of several partitions,
   * in partition order; the partitions taken and their epochs.
   */
  acquireLeases?(
    table: QualifiedName,
    params: Omit<AcquireParams, 'partition'> & { readonly partitions: readonly number[] },
  ): Statement<Array<{ readonly partition: number; readonly epoch: number }>>;
  /** False when the lease was lost. */
  renewLease(table: QualifiedName, lease: LeaseToken, ttl: number, now: number): Statements<boolean>;
  /**
   * Hands a lease back; with `notify` (a dialect with notifications), sends it when a lease was
   * released, so the other nodes take the partition at once.
   */
  releaseLease(table: QualifiedName, lease: LeaseToken, notify?: NotifyOnCommit): Statement<void>;
  /**
   * Heartbeat of a relaying node, and what it sees of the others; with `options`, also renews
   * the node's leases and reports the work due (one statement on Postgres).
   */
  heartbeat(
    table: QualifiedName,
    outbox: string,
    nodeId: string,
    ttl: number,
    now: number,
    options?: HeartbeatOptions,
  ): Batch<Heartbeat>;
  /**
   * Optional (one statement where the dialect can): a stopping node hands back `leases` (each
   * fenced), is forgotten, and with `notify` tells the others, at once.
   */
  leave?(
    table: QualifiedName,
    outbox: string,
    nodeId: string,
    leases: readonly LeaseToken[],
    notify: NotifyOnCommit | undefined,
  ): Statement<void>;
  /** Forgets a stopping node; with `notify` (a dialect with notifications), tells the others. */
  removeNode(table: QualifiedName, outbox: string, nodeId: string, notify?: NotifyOnCommit): Statement<void>;
  /**
   * Where `counts()` sums tallies that each change writes with it, rather than counting rows: the
   * upkeep the node holding partition 0 runs at every coordination tick. `compact` sums the
   * tallies into one row a partition; `recount`, when the outbox's last recount (recorded in the
   * database) is `everyMs` old, adds what the rows and the tallies differ by and returns it, or
   * `undefined` when not due.
   */
  tallies?: {
    compact(table: QualifiedName, outbox: string): Statements<void>;
    recount(table: QualifiedName, outbox: string, everyMs: number): Statements<TallyDrift | undefined>;
  };
  /** The recorded configuration of an outbox, or `undefined`. */
  readConfiguration(table: QualifiedName, outbox: string): Statement<RecordedConfiguration | undefined>;
  /**
   * Records an outbox's configuration, replacing the recorded one; with `onlyIfAbsent`, only when
   * none is recorded (of two nodes starting together on a fresh table, the first insert wins).
   */
  writeConfiguration(
    table: QualifiedName,
    outbox: string,
    configuration: RecordedConfiguration,
    now: number,
    onlyIfAbsent?: boolean,
  ): Statement<void>;
  /** The server version as a number (Postgres 150004, SQLite 3045001). */
  serverVersion(): Statement<number>;
  /** The oldest server version the SQL needs, in the same form, and its name for messages. */
  readonly minimumVersion: { readonly number: number; readonly name: string };
  /** Deletes one batch of delivered rows older than the retention window; how many. */
  prune(
    table: QualifiedName,
    outbox: string,
    olderThanSeconds: number,
    limit: number,
    now: number,
  ): Batch<number>;
  /**
   * The table or column a database error message says is missing (`"t_tallies"`, `"rewinds" of
   * "t_leases"`), or `undefined` for any other message: what `migrate()` has not created yet.
   */
  missingSchemaObject(message: string): string | undefined;
}
