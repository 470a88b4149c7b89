import type { LeaseToken } from './dialect.js';

/**
 * The shapes of a relaying node's heartbeat (see `Dialect.heartbeat`): what it renews and checks
 * besides recording the node, and what it reports. Kept beside dialect.ts, which re-exports them.
 */

/** A notification a statement sends, delivered when its transaction commits (Postgres). */
export interface NotifyOnCommit {
  readonly channel: string;
  readonly payload: string;
}

/** What a heartbeat does besides recording the node: see {@link Dialect.heartbeat}. */
export interface HeartbeatOptions {
  /**
   * Leases of the node's idle workers on the outbox, renewed with the heartbeat, each fenced on its
   * owner and epoch (in partition order: the order every statement that writes several lease rows
   * takes them in). {@link Heartbeat.renewed} and {@link Heartbeat.lost} say what became of them.
   */
  readonly renew: readonly LeaseToken[];
  /**
   * `notify` (where the dialect has notifications): also report which renewed partitions have a
   * message to deliver now, ready or with its retry due ({@link Heartbeat.due}): the safety net of
   * workers that sleep until a notification.
   */
  readonly checkDue: boolean;
  /** How old the outbox's last recount must be for {@link Heartbeat.upkeep}'s `recount`, ms. */
  readonly recountEvery: number;
  /** A notification sent when the heartbeat commits (a node joining asks the others to rebalance now). */
  readonly notify?: NotifyOnCommit | undefined;
}

export interface Heartbeat {
  /** Relaying nodes of this outbox, this one included. */
  readonly liveNodes: number;
  /** Partitions leased by a live owner, and until when (Unix ms, the database's clock). */
  readonly leases: ReadonlyArray<{
    readonly partition: number;
    readonly owner: string;
    readonly until: number;
  }>;
  /** The partitions of {@link HeartbeatOptions.renew} whose lease was renewed. */
  readonly renewed: readonly number[];
  /**
   * The partitions of {@link HeartbeatOptions.renew} whose lease is no longer the token's (taken
   * over). A lease neither renewed nor lost was busy (its row locked by the worker's own settle):
   * the worker renews it.
   */
  readonly lost: readonly number[];
  /** With {@link HeartbeatOptions.checkDue}: renewed partitions with a message to deliver now. */
  readonly due: readonly number[];
  /**
   * Whether the tallies' upkeep has work: more tally rows than partitions (`compact`), the last
   * recount older than `recountEvery` (`recount`). `undefined` where the dialect does not tell:
   * the upkeep then runs at every tick.
   */
  readonly upkeep?: { readonly compact: boolean; readonly recount: boolean } | undefined;
}
