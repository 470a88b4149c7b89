/** The public shapes of an `Outboxer`'s options and of what its administration calls return. */
import type { DatabaseAdapter } from './database.js';
import type { InboxOptions } from './inbox/options.js';
import type { Logger } from './logger.js';
import type { Message } from './message.js';
import type { OutboxOptions } from './options.js';

/** Options of an `Outboxer` instance. */
export interface OutboxerOptions<Tx, Sync extends boolean> {
  /** The database, from a client adapter such as `nodePostgres(pool)` or `betterSqlite3(db)`. */
  database: DatabaseAdapter<Tx, Sync>;
  /** The outboxes by name. May be left out (or empty) by a consumer that configures `inboxes`. */
  outboxes?: Record<string, OutboxOptions>;
  /** The inboxes by name (see docs/inbox.md): `inbox(name).handle(tx, message, handler)`. */
  inboxes?: Record<string, InboxOptions>;
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
   * only need to know "more than N". On SQLite, which counts the rows, it also stops counting
   * there, so the cost stays flat however deep the backlog; on Postgres `counts()` sums tallies
   * and costs the same at any depth either way.
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
