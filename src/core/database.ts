import type { QualifiedName } from './identifiers.js';
import type { Ordering } from './options.js';

/** SQL text and its parameters. Values always travel as parameters, never in the text. */
export interface SqlQuery {
  readonly text: string;
  readonly values: readonly unknown[];
  /**
   * One of the few fixed texts run again and again (the publish INSERT; the relay's poll,
   * acknowledge, settle, lease renewal): an adapter that can may send it as a prepared statement,
   * parsed and planned once per connection.
   */
  readonly prepare?: boolean;
}

export type Row = Record<string, unknown>;

/** A value that is synchronous for synchronous drivers (better-sqlite3) and a promise otherwise. */
export type MaybePromise<T, Sync extends boolean> = Sync extends true ? T : Promise<T>;

/**
 * The seam between the core and a client library: run SQL inside the user's transaction, and run
 * SQL on the library's own connection for the relay and the admin API. Everything else (which SQL,
 * which order) is the core's and the dialect's business.
 */
export interface DatabaseAdapter<Tx = unknown, Sync extends boolean = boolean> {
  readonly dialect: Dialect;
  /** True when {@link executeInTransaction} returns rows synchronously. */
  readonly sync: Sync;
  /**
   * Runs one statement inside the transaction the user passed to `publish`. Throws a
   * `NOT_IN_TRANSACTION` error when `tx` can be seen not to be inside a transaction.
   */
  executeInTransaction(tx: Tx, query: SqlQuery): MaybePromise<Row[], Sync>;
  /** Runs one statement on its own (autocommit) on the adapter's pool or connection. */
  execute(query: SqlQuery): Promise<Row[]>;
  /** Runs statements in one transaction, in order; all or nothing. Returns each statement's rows. */
  executeAtomically(queries: readonly SqlQuery[]): Promise<Row[][]>;
  /**
   * Postgres only: a dedicated connection that LISTENs on `channel`, outside the pool, that
   * reconnects with backoff. Absent where the database has no notifications.
   */
  listen?(channel: string, handlers: ListenHandlers): Promise<Listener>;
}

export interface ListenHandlers {
  onNotification(payload: string): void;
  /** Connected (true) or lost (false); while lost, workers poll. */
  onStatus(connected: boolean, error?: unknown): void;
}

export interface Listener {
  close(): Promise<void>;
}

/** What differs between databases, as capabilities the engine chooses its strategy from. */
export interface DialectCapabilities {
  /** LISTEN/NOTIFY wake-ups. */
  readonly notifications: boolean;
  /** Transaction-scoped advisory locks for `serializeWrites`. */
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

export interface PollParams {
  readonly lease: LeaseToken;
  readonly ordering: Ordering;
  readonly limit: number;
  /** Only ready messages with a larger id (see docs/ordering.md, "the cursor"). */
  readonly afterId: number;
  /**
   * Where a database has concurrent writers (Postgres): transactions that were writing when the
   * cursor moved past ids, each with the cursor to go back to once it has ended, since it may have
   * committed messages below the cursor. The poll starts from the lowest such cursor of the ended
   * ones, decided on its own snapshot, and returns `after_id` (where it started) and `in_flight`
   * (the writing transactions of its snapshot) on every row, with a row of nulls when it found nothing.
   */
  readonly watch?: PollWatch;
  /**
   * The partition's rewind count as the worker last saw it (`undefined` before its first poll).
   * Statements outside the worker that make messages ready again below its cursor (`discard()`
   * releasing a group, `retryDead()`) count a rewind on the outbox's lease rows in their own
   * transaction ({@link Dialect.countRewind}); a poll that sees a count other than this one starts
   * from the beginning. It reports the count (`rewinds`) and where it started (`after_id`) on its
   * first row.
   */
  readonly rewindsSeen?: number;
  /** Treat retries due before this time as due; `null` = now; `Infinity` = all (manual testing). */
  readonly dueBefore: Date | null | 'infinity';
  /** `onDead: 'park'`: a dead message blocks its group like a retrying one. */
  readonly parkDead: boolean;
  /**
   * Ids the poll leaves out whichever branch would return them: messages in flight (being
   * delivered, or acknowledged by the same statement, whose snapshot still shows them). Only
   * dialects with {@link Dialect.acknowledgeAndPoll} take it; others refuse it.
   */
  readonly exclude?: readonly number[];
  /**
   * A notify payload (`notify`, Postgres): the poll also reports, on its first row, whether any
   * transaction that publishes with this payload was in flight (`publishers_quiet` false when one
   * was). Tested after the poll's snapshot was taken, so a poll that follows a quiet one sees every
   * message whose NOTIFY was left out in favour of one the worker has already received.
   */
  readonly checkPublishers?: string;
}

export interface PollWatch {
  /** Transaction ids (xid8 as text). */
  readonly xids: readonly string[];
  /** The cursor to go back to when the transaction of the same index has ended. */
  readonly rewindTo: readonly number[];
}

export interface FailedMessage {
  readonly id: number;
  readonly error: string;
  readonly dead: boolean;
  /** Milliseconds until the next attempt (ignored when dead). */
  readonly delay: number;
}

export interface SettleParams {
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

/** Status column values. */
export const Status = { ready: 0, retry: 1, held: 2, dead: 3, delivered: 4 } as const;

/**
 * All the SQL of one database, as pure functions returning text and parameters. One
 * implementation per dialect folder; nothing else in the package writes SQL.
 */
export interface Dialect {
  readonly name: 'postgres' | 'sqlite';
  readonly capabilities: DialectCapabilities;
  /** DDL for a message table and its companions, in order; idempotent. */
  schema(table: QualifiedName): string[];
  /** Statements that make concurrent `migrate()` calls wait for each other, run first in the migration transaction. */
  migrationLock(): SqlQuery[];
  insert(table: QualifiedName, rows: readonly InsertRow[], options: InsertOptions): SqlQuery;
  /**
   * The rows of a poll, in any order (the engine orders them by id); a dialect that reports where
   * the poll started (see {@link PollParams.watch}) does so on the first row.
   */
  poll(table: QualifiedName, params: PollParams): SqlQuery;
  /**
   * Where polls keep a cursor ({@link DialectCapabilities.pollCursor}): counts a rewind on every
   * lease row of an outbox (see {@link PollParams.rewindsSeen}). Run first
   * in the transaction that makes messages ready below the workers' cursors: it locks the lease
   * rows before any message row, the order a worker's settle takes them in.
   */
  countRewind?(table: QualifiedName, outbox: string): SqlQuery;
  /** Moves ready messages of blocked groups out of the poll's way (`held`), re-checking the block. */
  hold(
    table: QualifiedName,
    lease: LeaseToken,
    ids: readonly number[],
    groups: readonly string[],
    parkDead: boolean,
  ): SqlQuery;
  /** The earliest retry time of a partition, to sleep no longer than needed. */
  nextRetryAt(table: QualifiedName, outbox: string, partition: number): SqlQuery;
  /**
   * Statements, in one transaction, that acknowledge, retry, dead-letter and unblock, fenced on the
   * lease. The first returns the lease row (none when the lease was lost). A single statement is
   * run on its own, without a transaction around it. An acknowledge-only settle need not wait for
   * its commit to be durable (Postgres commits it asynchronously): a crash that forgets it only
   * delivers its messages again.
   */
  settle(table: QualifiedName, params: SettleParams): SqlQuery[];
  /**
   * Optional, where a round trip costs more than the statement (a server database): an
   * acknowledge-only settle (everything delivered, nothing failed, no group unblocked) and the next
   * poll in one statement. The poll's `exclude` must hold every acknowledged id. Returns the poll's
   * rows, the first with `lease_epoch`; one row of nulls but `lease_epoch` when the poll is empty;
   * none when the lease was lost. The engine also relies on it to poll while a batch is being delivered.
   */
  acknowledgeAndPoll?(table: QualifiedName, settle: SettleParams, poll: PollParams): SqlQuery;
  acquireLease(table: QualifiedName, params: AcquireParams): SqlQuery;
  renewLease(table: QualifiedName, lease: LeaseToken, ttl: number): SqlQuery;
  releaseLease(table: QualifiedName, lease: LeaseToken): SqlQuery;
  /**
   * Heartbeat of a relaying node. The last statement returns `live_nodes` (relaying this outbox,
   * this one included) and `leases` (JSON text: live `{ partition, owner }` pairs).
   */
  heartbeat(table: QualifiedName, outbox: string, nodeId: string, ttl: number): SqlQuery[];
  removeNode(table: QualifiedName, outbox: string, nodeId: string): SqlQuery;
  /**
   * One row: `pending`, `delivered`, `dead`, `orphaned` (pending rows in partitions at or above
   * `partitions`, which no worker reads) and `relay_seen_at` (the last heartbeat of a relaying node).
   * With `upTo`, each status is counted only up to `upTo` rows (a sum of them may exceed it); a
   * dialect that keeps tallies may ignore it and count exactly.
   */
  counts(table: QualifiedName, outbox: string, partitions: number, upTo?: number): SqlQuery;
  /**
   * Where `counts()` sums tallies that each change writes with it, rather than counting rows: the
   * upkeep the node holding partition 0 runs at every coordination tick. `compact` sums the
   * tallies into one row a partition; `recount`, when the outbox's last recount (recorded in the
   * database) is `everyMs` old, adds what the rows and the tallies differ by and returns it as
   * `pending`, `dead` and `delivered`, or no row when not due.
   */
  tallies?: {
    compact(table: QualifiedName, outbox: string): SqlQuery;
    recount(table: QualifiedName, outbox: string, everyMs: number): SqlQuery;
  };
  /** The recorded configuration of an outbox: `partitions`, `ordering`, `serialize_writes`, `on_dead`, or no row. */
  readConfiguration(table: QualifiedName, outbox: string): SqlQuery;
  /**
   * Records an outbox's configuration, replacing the recorded one; with `onlyIfAbsent`, only when
   * none is recorded (of two nodes starting together on a fresh table, the first insert wins).
   */
  writeConfiguration(
    table: QualifiedName,
    outbox: string,
    configuration: RecordedConfiguration,
    onlyIfAbsent?: boolean,
  ): SqlQuery;
  /** One row with `version`: the server version as a number (Postgres 150004, SQLite 3045001). */
  serverVersion(): SqlQuery;
  /** The oldest server version the SQL needs, in the same form, and its name for messages. */
  readonly minimumVersion: { readonly number: number; readonly name: string };
  list(table: QualifiedName, outbox: string, which: 'pending' | 'dead', limit: number): SqlQuery;
  /** Dead messages back to pending; with `parkDead`, as due retries, so they still block their group until delivered. */
  retryDead(
    table: QualifiedName,
    outbox: string,
    ids: readonly number[] | undefined,
    parkDead: boolean,
  ): SqlQuery;
  discard(table: QualifiedName, outbox: string, ids: readonly number[]): SqlQuery;
  /** Releases held messages whose group no longer has a blocking head (after an admin change). */
  releaseOrphanedHolds(table: QualifiedName, outbox: string, parkDead: boolean): SqlQuery;
  /** Groups held by a retrying (or parked dead) head, oldest head first. */
  blockedGroups(table: QualifiedName, outbox: string, limit: number, parkDead: boolean): SqlQuery;
  /** Deletes one batch of delivered rows older than the retention window; the last statement returns `pruned`. */
  prune(table: QualifiedName, outbox: string, olderThanSeconds: number, limit: number): SqlQuery[];
  /** Reads a row of {@link poll} or {@link list} into an envelope. */
  toEnvelope(row: Row, outbox: string): PolledEnvelope;
  /**
   * The table or column a database error message says is missing (`"t_tallies"`, `"rewinds" of
   * "t_leases"`), or `undefined` for any other message: what `migrate()` has not created yet.
   */
  missingSchemaObject(message: string): string | undefined;
}

export interface PolledEnvelope {
  readonly id: number;
  readonly outbox: string;
  readonly type: string | null;
  readonly groupKey: string | null;
  readonly partition: number;
  readonly payload: unknown;
  readonly headers: Record<string, string>;
  readonly attempts: number;
  readonly lastError: string | null;
  readonly nextAttemptAt: Date | null;
  readonly failingSince: Date | null;
  readonly insertedAt: Date;
  /** Internal: the status the message had when read. */
  readonly status: number;
  /** Internal: a ready message whose group is blocked by a retrying head. */
  readonly blocked: boolean;
}
