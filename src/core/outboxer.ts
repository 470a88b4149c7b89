import { randomUUID } from 'node:crypto';
import { Administration } from './administration.js';
import type {
  BlockedGroup,
  BlockedGroupCounts,
  BlockedGroupHead,
  BlockedGroupsOptions,
  Counts,
  CountsOptions,
  FindMessagesOptions,
  MessagePage,
  NodeState,
  OutboxerOptions,
  PartitionState,
  PublishInput,
} from './api.js';
import { checkServerVersion } from './configuration.js';
import type { DatabaseAdapter, MaybePromise } from './database.js';
import type { PublishOptions } from './encoding.js';
import { OutboxerError } from './errors.js';
import { sameTable, type QualifiedName } from './identifiers.js';
import { Inbox } from './inbox/inbox.js';
import { inboxTables, resolveInboxes, type ResolvedInbox } from './inbox/options.js';
import { InboxPruner } from './inbox/pruner.js';
import { Instance } from './instance.js';
import { notifies } from './local-wakeups.js';
import { isMessage, type Message } from './message.js';
import {
  INSTANCE_KEYS,
  invalidOption,
  rejectUnknownKeys,
  resolveInstance,
  type InstanceSettings,
  type ResolvedOutbox,
} from './options.js';
import { Publisher } from './publisher.js';
import type { Envelope } from './relay.js';
import { RelayingNode } from './relaying.js';
import { addInboxOutboxes, resolveOutboxes } from './outboxes.js';
import { drainOutbox, mergeDrainResults, type DrainOptions, type DrainResult } from './testing.js';

type Published<Sync extends boolean> = MaybePromise<number, Sync>;

/**
 * The transactional outbox. Publish inside your transaction; relay workers deliver in order.
 *
 * @example
 * const outboxer = new Outboxer({
 *   database: nodePostgres(pool),
 *   outboxes: { orders: { relay: functionRelay(async (m) => send(m.payload)) } },
 * });
 * await outboxer.migrate();
 * await outboxer.start();
 * await client.query('BEGIN');
 * await outboxer.publish(client, 'orders', { orderId: 42 }, { groupKey: 'order:42' });
 * await client.query('COMMIT');
 */
export class Outboxer<Tx = unknown, Sync extends boolean = false> {
  readonly settings: InstanceSettings;
  private readonly instance: Instance<Tx, Sync>;
  private readonly publisher: Publisher<Tx, Sync>;
  private readonly relaying: RelayingNode;
  private readonly administration: Administration;
  private readonly inboxes: ReadonlyMap<string, { options: ResolvedInbox; inbox: Inbox<unknown, boolean> }>;
  private readonly inboxPruner: InboxPruner;

  constructor(options: OutboxerOptions<Tx, Sync>) {
    if (typeof options !== 'object' || options === null)
      throw invalidOption('', 'an options object', options);
    rejectUnknownKeys('', options, INSTANCE_KEYS);
    const database = options.database as unknown;
    if (
      typeof database !== 'object' ||
      database === null ||
      !('dialect' in database) ||
      !('executeInTransaction' in database)
    ) {
      throw invalidOption(
        'database',
        'a database adapter such as nodePostgres(pool) from "outboxer/pg" or betterSqlite3(db) from "outboxer/better-sqlite3"',
        database,
      );
    }
    this.settings = resolveInstance({ ...options });
    if (options.publishHeaders !== undefined && typeof options.publishHeaders !== 'function') {
      throw invalidOption('publishHeaders', 'a function returning headers', options.publishHeaders);
    }
    const adapter = options.database as DatabaseAdapter<unknown, boolean>;
    const processed = new Map<string, Inbox<unknown, boolean>>();
    const inboxes = resolveInboxes(options.inboxes, this.settings.schema, (name) => processed.get(name)!);
    const outboxes = resolveOutboxes(adapter, this.settings, options.outboxes, options.inboxes !== undefined);
    addInboxOutboxes(adapter, outboxes, inboxes);
    this.instance = new Instance(
      options.database,
      this.settings,
      outboxes,
      this.settings.logger,
      this.settings.nodeId ?? `${this.settings.name}:${randomUUID()}`,
    );
    const shared = this.instance as Instance<unknown, boolean>;
    this.administration = new Administration(shared);
    this.relaying = new RelayingNode(shared, (outbox) => this.administration.prune(outbox));
    // In-process wake-ups stand in for NOTIFY where an outbox goes without it (MySQL and SQLite
    // have none; on Postgres, `notify` is off by default), on an instance that relays; elsewhere
    // publish does not even collect the partitions it wrote.
    const wakesItself =
      this.settings.relay &&
      this.settings.testing !== 'manual' &&
      [...outboxes.values()].some((o) => !notifies(options.database, o));
    this.publisher = new Publisher(
      this.instance,
      options.publishHeaders,
      wakesItself ? (partitions) => this.relaying.published(partitions) : undefined,
    );
    const publisher = this.publisher as Publisher<unknown, boolean>;
    this.inboxes = new Map(
      [...inboxes.values()].map((inbox) => {
        const storage =
          inbox.process === undefined
            ? undefined
            : {
                outbox: inbox.process.outbox.name,
                publish: (tx: unknown, input: PublishInput) => publisher.publish(tx, input),
              };
        return [
          inbox.name,
          { options: inbox, inbox: new Inbox(adapter, inbox, this.settings.name, storage) },
        ];
      }),
    );
    // What a process option processed is recorded as handled by an inbox of its own, inbox:<name>:
    // user inboxes' names have no ':', so their records never meet.
    // (inbox(name).prune() prunes those records with the inbox's own.)
    for (const { options: inbox } of this.inboxes.values()) {
      if (inbox.process === undefined) continue;
      const options = Object.freeze({ ...inbox, name: inbox.process.outbox.name, process: undefined });
      processed.set(inbox.name, new Inbox(adapter, options, this.settings.name));
    }
    this.inboxPruner = new InboxPruner([...this.inboxes.values()], this.settings.logger);
  }

  /**
   * An inbox: `inbox(name).handle(tx, { id, source }, handler)` runs the handler inside your
   * transaction only for a message not handled before, and records it as handled there. Throws
   * `UNKNOWN_INBOX` for a name not in the `inboxes` option. See docs/inbox.md.
   */
  inbox(name: string): Inbox<Tx, Sync> {
    const found = this.inboxes.get(name);
    if (found === undefined) {
      const known = [...this.inboxes.keys()];
      throw new OutboxerError(
        'UNKNOWN_INBOX',
        `Unknown inbox "${String(name)}". ${known.length === 0 ? 'No inbox is configured: add it to the inboxes option.' : `Configured inboxes: ${known.join(', ')}.`}`,
      );
    }
    return found.inbox as unknown as Inbox<Tx, Sync>;
  }

  /** The resolved options of an outbox; throws `UNKNOWN_OUTBOX` for a name that was not configured. */
  outbox(name: string): ResolvedOutbox {
    return this.instance.outbox(name);
  }

  /** The names of the configured outboxes, in the order given. */
  outboxNames(): string[] {
    return [...this.instance.outboxes.keys()];
  }

  /**
   * Writes a message inside the caller's transaction: it exists if and only if the transaction
   * commits. Returns the message id (synchronously on better-sqlite3, as a promise otherwise).
   * Every check runs before SQL is sent, so a refused message leaves the transaction untouched.
   */
  publish(tx: Tx, message: Message): Published<Sync>;
  publish(tx: Tx, outbox: string, payload: unknown, options?: PublishOptions): Published<Sync>;
  publish(
    tx: Tx,
    target: string | Message,
    payload?: unknown,
    options: PublishOptions = {},
  ): Published<Sync> {
    return this.publisher.publish(tx, isMessage(target) ? target : { outbox: target, payload, ...options });
  }

  /**
   * Writes many messages in one statement per table, in the order given. Returns their ids in that
   * order. At most 10,000 messages and 64 MiB encoded a call (`BATCH_TOO_LARGE`): split larger sets
   * into several calls in the same transaction.
   */
  publishMany(tx: Tx, messages: readonly PublishInput[]): MaybePromise<number[], Sync> {
    return this.publisher.publishMany(tx, messages);
  }

  /**
   * Creates the tables and indexes of every configured outbox. Idempotent; concurrent calls from
   * several processes wait for each other. The same DDL is exported for your own migration tool.
   */
  async migrate(): Promise<void> {
    const { adapter } = this.instance;
    const tables: QualifiedName[] = [];
    for (const outbox of this.instance.outboxes.values()) {
      if (!tables.some((t) => sameTable(t, outbox.table))) tables.push(outbox.table);
    }
    await checkServerVersion(this.instance.engine);
    const inboxOptions = [...this.inboxes.values()].map(({ options }) => options);
    const statements = [
      ...adapter.dialect.migrationLock(),
      ...tables.flatMap((t) => adapter.dialect.schema(t)).map((text) => ({ text, values: [] })),
      ...inboxTables(new Map(inboxOptions.map((o) => [o.name, o])))
        .flatMap((t) => adapter.dialect.inbox.inboxSchema(t))
        .map((text) => ({ text, values: [] })),
    ];
    await adapter.executeAtomically(statements);
  }

  /**
   * Starts delivering: takes this node's share of every outbox's partitions and relays them.
   * Does nothing on a publish-only instance (`relay: false`) or in manual testing mode.
   */
  async start(): Promise<void> {
    if (!this.settings.relay || this.settings.testing === 'manual') return;
    await this.relaying.start();
    this.inboxPruner.start();
  }

  /**
   * Stops gracefully: every batch in flight is finished and settled (or, past `shutdownTimeout`,
   * abandoned unacknowledged), partitions are handed back, relays disconnected.
   */
  async stop(): Promise<void> {
    await this.inboxPruner.stop();
    await this.relaying.stop();
  }

  /**
   * `{ pending, delivered, dead, orphaned, relaySeenAt }` of an outbox, exact: the sum of its
   * tallies (`<table>_tallies`), a few rows however deep the backlog. On Postgres and MySQL each
   * change writes its tally with it (see `recountInterval`); on SQLite triggers keep them. Logs a
   * warning when messages are pending but no relaying node was seen for five lease periods (a
   * silent backlog), or when rows are orphaned.
   */
  counts(outbox: string, options: CountsOptions = {}): Promise<Counts> {
    return this.administration.counts(outbox, options);
  }

  /**
   * Groups held back by their head: a message waiting for its retry, or (with `onDead: 'park'`)
   * a dead one. Oldest head first. Counting what waits behind each head reads the group's pending
   * rows: an operator's call, not a per-request one.
   *
   * @example
   * for (const g of await outboxer.blockedGroups('orders')) {
   *   console.log(`${g.groupKey}: #${g.headId} failing since ${g.blockedSince} (${g.attempts}×, ${g.waiting} waiting): ${g.lastError}`);
   * }
   */
  blockedGroups(outbox: string, options?: BlockedGroupsOptions & { waiting?: true }): Promise<BlockedGroup[]>;
  /**
   * The same without counting what waits behind each head (`waiting: false`): the heads come from
   * a partial index, so the call costs the same at any depth of backlog (for dashboards).
   *
   * @example
   * // The blocked groups of one customer, however many other groups are blocked
   * await outboxer.blockedGroups('orders', { groupKeyPrefix: 'customer-42/', waiting: false });
   */
  blockedGroups(
    outbox: string,
    options: BlockedGroupsOptions & { waiting: false },
  ): Promise<BlockedGroupHead[]>;
  blockedGroups(
    outbox: string,
    options: BlockedGroupsOptions & { waiting?: boolean } = {},
  ): Promise<BlockedGroup[] | BlockedGroupHead[]> {
    return this.administration.blockedGroups(outbox, options);
  }

  /**
   * How many groups are blocked: by a retrying head (`retrying`), and by a parked dead one
   * (`parked`, 0 unless the outbox has `onDead: 'park'`). On SQLite read from tallies, exact at any
   * size; on Postgres and MySQL each is counted from the heads' partial index up to `upTo`
   * (default 10,000), and `exact` is false when one reached it. Never reads the backlog.
   *
   * @example
   * const { retrying, parked, exact } = await outboxer.blockedGroupCounts('orders');
   */
  blockedGroupCounts(outbox: string, options: { upTo?: number } = {}): Promise<BlockedGroupCounts> {
    return this.administration.blockedGroupCounts(outbox, options);
  }

  /** Messages waiting for delivery (ready, retrying or held), oldest first. `limit`: 1 to 10,000, default 100. */
  listPending(outbox: string, options: { limit?: number } = {}): Promise<Envelope[]> {
    return this.administration.list(outbox, 'pending', options.limit);
  }

  /** Dead messages, oldest first. `limit`: 1 to 10,000, default 100. */
  listDead(outbox: string, options: { limit?: number } = {}): Promise<Envelope[]> {
    return this.administration.list(outbox, 'dead', options.limit);
  }

  /**
   * Pending or dead messages that match every filter given, a page at a time (keyset paging by
   * id): for dashboards and support tools. Each call examines at most `scan` messages of the
   * status (default 10,000) from an index in id order, so it costs the same at any backlog depth;
   * `next` says where to go on from, `null` at the end.
   *
   * @example
   * let afterId = 0;
   * do {
   *   const page = await outboxer.findMessages('orders', { status: 'dead', groupKey: 'order:42', afterId });
   *   for (const m of page.messages) console.log(m.id, m.state, m.lastError);
   *   afterId = page.next ?? 0;
   * } while (afterId !== 0);
   */
  findMessages(outbox: string, options: FindMessagesOptions): Promise<MessagePage> {
    return this.administration.findMessages(outbox, options);
  }

  /**
   * Every partition of an outbox with its lease (holder, epoch, expiry) and its backlog, in order;
   * orphaned partitions (at or above the recorded `partitions`, holding messages) too. A read of
   * the lease table and, for the backlog, of the tallies on Postgres (a few rows per partition) or
   * the pending rows' indexes on SQLite (the cost of `counts()`).
   *
   * @example
   * for (const p of await outboxer.partitions('orders')) {
   *   console.log(p.partition, p.leased ? `${p.owner} (epoch ${p.epoch})` : 'unleased', p.backlog);
   * }
   */
  partitions(outbox: string): Promise<PartitionState[]> {
    return this.administration.partitions(outbox);
  }

  /**
   * The relaying nodes of an outbox from their heartbeats, by node id: `live` when seen within
   * `leaseTimeout`, with the partitions each holds. Nodes silent for ten lease periods are
   * forgotten by the others' heartbeats and no longer listed.
   *
   * @example
   * const live = (await outboxer.relayingNodes('orders')).filter((n) => n.live);
   */
  relayingNodes(outbox: string): Promise<NodeState[]> {
    return this.administration.nodes(outbox);
  }

  /**
   * Makes dead messages pending again, keeping their ids (and so their place in their group);
   * all of them, or those in `ids`. Returns how many were revived. A revived message is sent when
   * next picked up, possibly after later messages of its group.
   */
  retryDead(outbox: string, options: { ids?: readonly number[] } = {}): Promise<number> {
    return this.administration.retryDead(outbox, options).then((n) => this.relaying.changed(outbox, n));
  }

  /** Removes messages for good (pending or dead); a group they blocked moves on. Returns how many were removed. */
  discard(outbox: string, ids: readonly number[]): Promise<number> {
    return this.administration.discard(outbox, ids).then((n) => this.relaying.changed(outbox, n));
  }

  /** Deletes delivered rows past the retention window, in batches. Returns how many. The pruner calls it. */
  prune(outbox: string, options: { onBatch?: (pruned: number) => void } = {}): Promise<number> {
    return this.administration.prune(this.instance.outbox(outbox), options.onBatch);
  }

  /**
   * Manual testing mode: delivers everything pending through the real relays, retries included
   * without waiting for backoff, and reports what happened.
   */
  async drain(outbox?: string, options: DrainOptions = {}): Promise<DrainResult> {
    if (this.settings.testing !== 'manual') {
      throw new OutboxerError(
        'INVALID_STATE',
        'drain() is for manual testing mode: create the instance with testing: "manual".',
      );
    }
    await this.relaying.startDestinations();
    const targets = outbox === undefined ? [...this.instance.outboxes.values()] : [this.outbox(outbox)];
    const results: DrainResult[] = [];
    for (const target of targets)
      results.push(await drainOutbox(this.relaying.workerDeps(target), this.instance.nodeId, options));
    return mergeDrainResults(results);
  }

  /** Ends manual testing mode's relays (`stop()` does it for running instances). */
  async close(): Promise<void> {
    await this.stop();
    await this.relaying.stopDestinations();
  }
}
