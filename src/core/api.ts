/** The public shapes of an `Outboxer`'s options and of what its administration calls return. */
import type { DatabaseAdapter } from './database.js';
import type { InboxOptions } from './inbox/options.js';
import type { Logger } from './logger.js';
import type { Message } from './message.js';
import type { OutboxOptions } from './options.js';
import type { Envelope } from './relay.js';

/** Options of an `Outboxer` instance. */
export interface OutboxerOptions<Tx, Sync extends boolean> {
  /** The database, from a client adapter such as `nodePostgres(pool)` or `betterSqlite3(db)`. */
  database: DatabaseAdapter<Tx, Sync>;
  /** The outboxes by name. May be left out (or empty) by a consumer that configures `inboxes`. */
  outboxes?: Record<string, OutboxOptions>;
  /**
   * The inboxes by name (see docs/inbox.md): `inbox(name).handle(tx, message, handler)`, or, with
   * a `process` option, `inbox(name).store(tx, message)` and processing in order by relaying nodes.
   */
  inboxes?: Record<string, InboxOptions<Tx, Sync>>;
  /** Default true. False makes a publish-only instance: no workers, no connections of its own. */
  relay?: boolean;
  /** `'manual'`: no workers; deliver with `drain()` in tests. */
  testing?: 'manual';
  /** Instance name, part of the NOTIFY payload. Default `'outboxer'`. */
  name?: string;
  /**
   * This node's identity in the lease table, for platforms that run at most one live process per
   * identity (a StatefulSet pod name, a host running one relay): a restart with the same `nodeId`
   * takes back the partitions its crashed predecessor held at once instead of waiting up to
   * `leaseTimeout` for them to lapse. Never give two live processes the same `nodeId`. Default: a
   * fresh `name:uuid` per instance.
   */
  nodeId?: string;
  /** Schema of tables given without one. Default: the connection's search path (Postgres), `main` (SQLite). */
  schema?: string;
  /** Milliseconds after which a silent worker loses its partition. Default 30000. */
  leaseTimeout?: number;
  /** Milliseconds `stop()` waits for batches in flight before abandoning them. Default 30000. */
  shutdownTimeout?: number;
  /** Longest `lastError` kept, in characters. Default 2000. */
  maxErrorLength?: number;
  /**
   * Where outboxer logs. A logger (`console`, pino, winston…) gets every call, `debug` to `error`.
   * Left out: warnings and errors go to `console.warn` / `console.error`, each repeating message
   * printed at most once a minute per outbox and partition (with a count of those left out);
   * `debug` and `info` are dropped. `false`: nothing is logged.
   */
  logger?: Logger | false;
  /**
   * Headers added to every published message (the message's own headers win), computed at
   * publish time: the trace context from `outboxer/opentelemetry`, a tenant id…
   */
  publishHeaders?: () => Record<string, string> | undefined;
}

/** A blocked group as `blockedGroups(outbox, { waiting: false })` reports it: without the count of what waits. */
export type BlockedGroupHead = Omit<BlockedGroup, 'waiting'>;

/** Which blocked groups `blockedGroups()` lists. */
export interface BlockedGroupsOptions {
  /** At most this many, oldest head first: 1 to 10,000, default 100. */
  limit?: number;
  /**
   * Only the groups whose key starts with this (case-sensitive, 1 to 1000 characters; a whole
   * key matches itself). Checked on the blocked heads in the database, not on the listed page.
   */
  groupKeyPrefix?: string;
}

/** How many groups are blocked; see `blockedGroupCounts()`. */
export interface BlockedGroupCounts {
  /** Groups held back by a message waiting for its retry. */
  retrying: number;
  /** Groups held back by a dead message (`onDead: 'park'`). */
  parked: number;
  /** False when a figure stopped at `upTo` (Postgres and MySQL): there are at least that many. */
  exact: boolean;
}

/** A group held back by its head; see `blockedGroups()`. */
export interface BlockedGroup {
  groupKey: string;
  /** The message holding the group back. */
  headId: number;
  /** True when the head is dead and the outbox parks its group (`onDead: 'park'`). */
  parked: boolean;
  attempts: number;
  lastError: string | null;
  /** When the head first failed. */
  blockedSince: Date | null;
  /** When the head is tried again (`null` for a parked head). */
  nextAttemptAt: Date | null;
  /** Messages of the group waiting behind the head. */
  waiting: number;
}

export interface Counts {
  /** Waiting for delivery: ready, retrying, or held behind a retrying message of their group. */
  pending: number;
  /** Delivered and kept (`retention: { keep }`) until pruned. */
  delivered: number;
  dead: number;
  /**
   * Pending messages in a partition at or above the `partitions` recorded by the relaying nodes
   * (this instance's while none is recorded), which no worker reads: left behind by lowering
   * `partitions` on a live backlog, or written by a publisher configured with more partitions than
   * the relays. Part of `pending`.
   */
  orphaned: number;
  /** The last heartbeat of any node relaying this outbox, or `null` if none was ever seen. */
  relaySeenAt: Date | null;
  /** When the oldest pending message was published, or `null` when nothing is pending. */
  oldestPendingAt: Date | null;
  /**
   * False when `counts(outbox, { upTo })` capped a figure: a figure equal to `upTo` then means
   * "at least `upTo`". Always true without `upTo`.
   */
  exact: boolean;
}

export interface CountsOptions {
  /**
   * Report each figure only up to this many (a positive integer), for dashboards and alerts that
   * only need to know "more than N". Every dialect sums tallies, so `counts()` costs the same at
   * any depth either way: only the figures reported are capped.
   */
  upTo?: number;
}

/** One message for `publishMany()`: a typed message, or an outbox name and payload. */
export type PublishInput =
  | Message
  | {
      outbox: string;
      payload: unknown;
      groupKey?: string | null;
      headers?: Record<string, string>;
      type?: string | null;
    };

/** What `findMessages()` looks for. Every filter given must match. */
export interface FindMessagesOptions {
  /** `'pending'` (ready, retrying or held behind their group's head) or `'dead'`. */
  status: 'pending' | 'dead';
  /** The exact group key. */
  groupKey?: string;
  /** The exact message type. */
  type?: string;
  /** A substring of the last error (case-sensitive). */
  error?: string;
  /** Keyset paging: only messages with a larger id; pass the previous page's `next`. Default 0. */
  afterId?: number;
  /** Messages returned at most: 1 to 10,000. Default 100. */
  limit?: number;
  /**
   * Messages of the status examined at most, in id order from `afterId`: 1 to 100,000. Default
   * 10,000. It bounds the call's cost however deep the backlog; a page that examined this many
   * without finding `limit` matches returns what it found and a `next` to go on from.
   */
  scan?: number;
}

/** Where a message stands: ready, retrying (failed, waiting for its next attempt), held behind its group's head, or dead. */
export type MessageState = 'ready' | 'retrying' | 'held' | 'dead';

/** A message `findMessages()` found. */
export interface FoundMessage extends Envelope {
  readonly state: MessageState;
}

/** One page of `findMessages()`. */
export interface MessagePage {
  /** In id order. */
  messages: FoundMessage[];
  /** The `afterId` of the next page, or `null` when the search reached the last message. */
  next: number | null;
}

/** A partition of an outbox, as `partitions()` reports it. */
export interface PartitionState {
  partition: number;
  /** The node holding the lease, or the last one that did; `null` when none ever did. */
  owner: string | null;
  /** The lease's epoch: it grows by one each time the partition changes hands. */
  epoch: number | null;
  /** When the lease runs out (`null`: never taken, or handed back). */
  leaseUntil: Date | null;
  /** A live lease: a node relays this partition now. */
  leased: boolean;
  /** Pending messages of the partition. */
  backlog: number;
  /** At or above the recorded `partitions`: no worker reads it (see `Counts.orphaned`). */
  orphaned: boolean;
}

/** A relaying node of an outbox, from its heartbeats; see `relayingNodes()`. */
export interface NodeState {
  nodeId: string;
  lastSeen: Date;
  /** Seen within the last `leaseTimeout`. */
  live: boolean;
  /** The partitions it holds a live lease on. */
  partitions: number[];
}
