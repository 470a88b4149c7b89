/**
 * The operator's part of the `Dialect` seam (dialect.ts composes it): the statements behind
 * `counts()`, the listings, `retryDead()`, `discard()`, `blockedGroups()`, `findMessages()`,
 * `partitions()` and `relayingNodes()`, and the shapes of what they read. Nothing here runs SQL.
 */
import type { PolledEnvelope } from './dialect.js';
import type { QualifiedName } from './identifiers.js';
import type { Statement, Statements } from './sql.js';

/** What `counts()` reports, straight from the database. */
export interface CountFigures {
  readonly pending: number;
  readonly delivered: number;
  readonly dead: number;
  readonly orphaned: number;
  readonly relaySeenAt: Date | null;
  readonly oldestPendingAt: Date | null;
}

/**
 * How many groups a retrying head holds back, and how many a parked dead head does (0 unless the
 * outbox parks): the grouped rows of those statuses, as `blockedGroups` lists them.
 */
export interface BlockedCounts {
  readonly retrying: number;
  readonly parked: number;
  /** False when a figure was counted up to a cap and reached it. */
  readonly exact: boolean;
}

/** The head of a blocked group, with how many messages wait behind it. */
export interface BlockedHead {
  readonly head: PolledEnvelope;
  readonly waiting: number;
}

/**
 * A bounded, keyset-paged search of pending or dead messages: the statement examines at most
 * `scan` rows of the status in id order after `afterId`, and returns up to `limit` of them that
 * match every filter given, so its cost does not grow with the backlog.
 */
export interface MessageFilter {
  readonly which: 'pending' | 'dead';
  readonly afterId: number;
  readonly limit: number;
  readonly scan: number;
  /** The exact group key. */
  readonly groupKey?: string;
  /** The exact type. */
  readonly type?: string;
  /** A substring of the last error (case-sensitive). */
  readonly error?: string;
}

/** What a {@link MessageFilter} search read. */
export interface FoundMessages {
  /** In id order; `status` tells ready, retrying, held and dead apart. */
  readonly messages: readonly PolledEnvelope[];
  /** Rows examined (at most `scan`). */
  readonly scanned: number;
  /** The largest id examined, or `null` when none was. */
  readonly scannedTo: number | null;
}

/** A partition of an outbox: its lease row (if any) and its backlog. */
export interface PartitionRow {
  readonly partition: number;
  /** The node that holds or last held the lease, or `null` when no lease was ever taken. */
  readonly owner: string | null;
  readonly epoch: number | null;
  readonly leaseUntil: Date | null;
  /** The lease has not expired (by the database's clock on Postgres and MySQL, the process's on SQLite). */
  readonly leased: boolean;
  /** Pending messages of the partition. */
  readonly backlog: number;
}

/** A relaying node of an outbox, from its heartbeats. */
export interface NodeRow {
  readonly nodeId: string;
  readonly lastSeen: Date;
  /** Seen within the last lease period. */
  readonly live: boolean;
  /** The partitions it holds a live lease on, ascending. */
  readonly partitions: readonly number[];
}

/** The operator's statements of a `Dialect`. */
export interface DialectAdministration {
  /**
   * The figures of `counts()`: `orphaned` are pending rows in partitions at or above `partitions`,
   * which no worker reads. With `upTo`, each status is counted only up to `upTo` rows (a sum of
   * them may exceed it); a dialect that keeps tallies may ignore it and count exactly.
   */
  counts(table: QualifiedName, outbox: string, partitions: number, upTo?: number): Statement<CountFigures>;
  list(
    table: QualifiedName,
    outbox: string,
    which: 'pending' | 'dead',
    limit: number,
  ): Statement<PolledEnvelope[]>;
  /** A bounded search of pending or dead messages (see {@link MessageFilter}). */
  findMessages(table: QualifiedName, outbox: string, filter: MessageFilter): Statement<FoundMessages>;
  /**
   * Partitions 0 to `partitions - 1`, and any other that has a lease row or a backlog (orphans),
   * in order: the lease of each and its pending messages.
   */
  partitions(
    table: QualifiedName,
    outbox: string,
    partitions: number,
    now: number,
  ): Statement<PartitionRow[]>;
  /** The nodes that sent a heartbeat for the outbox and are not yet forgotten, by node id. */
  nodes(table: QualifiedName, outbox: string, ttl: number, now: number): Statement<NodeRow[]>;
  /**
   * Dead messages back to pending; with `parkDead`, as due retries, so they still block their
   * group until delivered. How many were revived.
   */
  retryDead(
    table: QualifiedName,
    outbox: string,
    ids: readonly number[] | undefined,
    parkDead: boolean,
    now: number,
  ): Statements<number>;
  /** Removes messages; how many. */
  discard(table: QualifiedName, outbox: string, ids: readonly number[]): Statements<number>;
  /** Releases held messages whose group no longer has a blocking head (after an admin change). */
  releaseOrphanedHolds(table: QualifiedName, outbox: string, parkDead: boolean): Statement<void>;
  /**
   * Groups held by a retrying (or parked dead) head, oldest head first. With `countWaiting` false,
   * what waits behind each head is not counted (`waiting` 0): the count reads the group's pending
   * rows, the heads alone a partial index. With `groupKeyPrefix`, only the groups whose key starts
   * with it (case-sensitive), checked on the heads, never on the backlog.
   */
  blockedGroups(
    table: QualifiedName,
    outbox: string,
    limit: number,
    parkDead: boolean,
    countWaiting?: boolean,
    groupKeyPrefix?: string,
  ): Statement<BlockedHead[]>;
  /**
   * How many groups are blocked (see {@link BlockedCounts}). A dialect that keeps tallies counts
   * exactly; the others count the heads from their partial index up to `upTo` each.
   */
  blockedCounts(
    table: QualifiedName,
    outbox: string,
    parkDead: boolean,
    upTo: number,
  ): Statement<BlockedCounts>;
}
