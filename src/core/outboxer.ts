import { randomUUID } from 'node:crypto';
import {
  checkConfigurations,
  checkRecordedOnDead,
  checkServerVersion,
  readRecordedConfiguration,
} from './configuration.js';
import { settlesWithin } from './timing.js';
import { OutboxCoordinator } from './coordinator.js';
import type {
  DatabaseAdapter,
  Dialect,
  InsertRow,
  Listener,
  MaybePromise,
  Row,
  SqlQuery,
} from './database.js';
import { encodeMessage, type PublishOptions } from './encoding.js';
import { describeError, explainMissingSchema, isOutboxerError, OutboxerError } from './errors.js';
import { sameTable, type QualifiedName } from './identifiers.js';
import { checkBatchBytes, checkBatchLength, checkIds, listLimit } from './limits.js';
import { silentLogger, type Logger } from './logger.js';
import { isMessage, type Message } from './message.js';
import {
  INSTANCE_KEYS,
  invalidOption,
  rejectUnknownKeys,
  resolveInstance,
  resolveOutbox,
  type InstanceSettings,
  type OutboxOptions,
  type ResolvedOutbox,
} from './options.js';
import type { Envelope, Relay } from './relay.js';
import { drainOutbox, type DrainOptions, type DrainResult } from './testing.js';
import { channels, emit } from './telemetry.js';
import { NOTIFY_CHANNEL, notifyPayload } from './notifications.js';
import type { WorkerDeps } from './worker.js';

/** Options of an {@link Outboxer} instance. */
export interface OutboxerOptions<Tx, Sync extends boolean> {
  /** The database, from a client adapter such as `nodePostgres(pool)` or `betterSqlite3(db)`. */
  database: DatabaseAdapter<Tx, Sync>;
  /** The outboxes by name. */
  outboxes: Record<string, OutboxOptions>;
  /** Default true. False makes a publish-only instance: no workers, no connections of its own. */
  relay?: boolean;
  /** `'manual'`: no workers; deliver with {@link Outboxer.drain} in tests. */
  testing?: 'manual';
  /** Instance name, part of the NOTIFY payload. Default `'outboxer'`. */
  name?: string;
  /** Schema of tables given without one. Default: the connection's search path (Postgres), `main` (SQLite). */
  schema?: string;
  /** Milliseconds after which a silent worker loses its partition. Default 30000. */
  leaseTimeout?: number;
  /** Milliseconds `stop()` waits for batches in flight before abandoning them. Default 30000. */
  shutdownTimeout?: number;
  /** Longest `lastError` kept, in characters. Default 2000. */
  maxErrorLength?: number;
  /** Where outboxer logs. Default: silent. `console` works. */
  logger?: Logger;
  /**
   * Headers added to every published message (the message's own headers win), computed at
   * publish time: the trace context from `outboxer/opentelemetry`, a tenant id…
   */
  publishHeaders?: () => Record<string, string> | undefined;
}

/** A group held back by its head; see {@link Outboxer.blockedGroups}. */
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

type Published<Sync extends boolean> = MaybePromise<number, Sync>;

/** One message for {@link Outboxer.publishMany}: a typed message, or an outbox name and payload. */
export type PublishInput =
  | Message
  | {
      outbox: string;
      payload: unknown;
      groupKey?: string | null;
      headers?: Record<string, string>;
      type?: string | null;
    };

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
  private readonly adapter: DatabaseAdapter<Tx, Sync>;
  private readonly outboxes: ReadonlyMap<string, ResolvedOutbox>;
  private readonly nodeId: string;
  private readonly logger: Logger;
  private readonly publishHeaders: (() => Record<string, string> | undefined) | undefined;
  private coordinators = new Map<string, OutboxCoordinator>();
  private listener: Listener | undefined;
  private state: 'idle' | 'starting' | 'running' | 'stopping' = 'idle';
  private relaysStarted: Promise<void> | undefined;
  private readonly startedRelays = new Set<Relay>();
  private readonly onDeadChecked = new Set<string>();

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
    this.settings = resolveInstance(options as unknown as Record<string, unknown>);
    this.adapter = options.database;
    this.logger = this.settings.logger ?? silentLogger;
    if (options.publishHeaders !== undefined && typeof options.publishHeaders !== 'function') {
      throw invalidOption('publishHeaders', 'a function returning headers', options.publishHeaders);
    }
    this.publishHeaders = options.publishHeaders;
    this.outboxes = this.resolveOutboxes(options.outboxes);
    this.nodeId = `${this.settings.name}:${randomUUID()}`;
  }

  private resolveOutboxes(raw: unknown): Map<string, ResolvedOutbox> {
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw) || Object.keys(raw).length === 0) {
      throw invalidOption('outboxes', 'an object with at least one outbox, e.g. { orders: { relay } }', raw);
    }
    const relays = this.settings.relay || this.settings.testing === 'manual';
    const resolved = new Map<string, ResolvedOutbox>();
    for (const [name, options] of Object.entries(raw)) {
      const outbox = resolveOutbox(name, options, { relay: relays, schema: this.settings.schema });
      const { capabilities } = this.adapter.dialect;
      if (outbox.notify && !capabilities.notifications) {
        throw invalidOption(
          `outboxes.${name}.notify`,
          `false on ${this.adapter.dialect.name} (it has no notifications)`,
          outbox.notify,
        );
      }
      resolved.set(name, outbox);
    }
    return resolved;
  }

  /** The resolved options of an outbox; throws `UNKNOWN_OUTBOX` for a name that was not configured. */
  outbox(name: string): ResolvedOutbox {
    const outbox = this.outboxes.get(name);
    if (outbox === undefined) {
      throw new OutboxerError(
        'UNKNOWN_OUTBOX',
        `Unknown outbox ${JSON.stringify(name)}. Configured outboxes: ${[...this.outboxes.keys()].join(', ')}.`,
      );
    }
    return outbox;
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
    const input: PublishInput = isMessage(target) ? target : { outbox: target, payload, ...options };
    return this.mapResult(this.insert(tx, [input]), (ids) => ids[0]!);
  }

  /**
   * Writes many messages in one statement per table, in the order given. Returns their ids in that
   * order. At most 10,000 messages and 64 MiB encoded a call (`BATCH_TOO_LARGE`): split larger sets
   * into several calls in the same transaction.
   */
  publishMany(tx: Tx, messages: readonly PublishInput[]): MaybePromise<number[], Sync> {
    if (!Array.isArray(messages)) {
      const error = invalidOption('messages', 'an array of messages', messages);
      if (this.adapter.sync) throw error;
      return Promise.reject(error) as MaybePromise<number[], Sync>;
    }
    if (messages.length === 0)
      return (this.adapter.sync ? [] : Promise.resolve([])) as unknown as MaybePromise<number[], Sync>;
    return this.insert(tx, messages, true);
  }

  private insert(tx: Tx, inputs: readonly PublishInput[], many = false): MaybePromise<number[], Sync> {
    if (this.adapter.sync) return this.insertNow(tx, inputs, many);
    // Async adapters report every failure, validation included, as a rejected promise.
    try {
      return this.insertNow(tx, inputs, many);
    } catch (error) {
      return Promise.reject(error) as MaybePromise<number[], Sync>;
    }
  }

  private insertNow(tx: Tx, inputs: readonly PublishInput[], many: boolean): MaybePromise<number[], Sync> {
    if (many) checkBatchLength(inputs.length);
    const groups = this.encodeByTable(inputs);
    const { dialect } = this.adapter;
    const run = (group: EncodedGroup): MaybePromise<Row[], Sync> => {
      const notify = group.notify
        ? {
            channel: NOTIFY_CHANNEL,
            payloads: [...group.partitions.values()].map(({ outbox, partition }) =>
              notifyPayload(this.settings.name, outbox, partition),
            ),
          }
        : undefined;
      const query = dialect.insert(group.table, group.rows, { serialize: group.serialize, notify });
      const explain = (error: unknown) => explainMissingSchema(dialect, group.table, error);
      if (this.adapter.sync) {
        try {
          return this.adapter.executeInTransaction(tx, query);
        } catch (error) {
          throw explain(error);
        }
      }
      return (this.adapter.executeInTransaction(tx, query) as Promise<Row[]>).catch((error: unknown) => {
        throw explain(error);
      }) as MaybePromise<Row[], Sync>;
    };
    const finish = (results: Row[][]): number[] => {
      const ids = new Array<number>(inputs.length);
      groups.forEach((group, g) => {
        const sorted = results[g]!.map((row) => Number(row.id)).sort((a, b) => a - b);
        group.positions.forEach((position, i) => (ids[position] = sorted[i]!));
      });
      emit(channels.publish, () => ({
        instance: this.settings.name,
        outboxes: [...new Set(inputs.map((i) => i.outbox))],
        count: inputs.length,
        ids,
      }));
      return ids;
    };
    if (this.adapter.sync) return finish(groups.map((g) => run(g) as Row[])) as MaybePromise<number[], Sync>;
    return (async () => {
      const results: Row[][] = [];
      for (const group of groups) results.push(await (run(group) as Promise<Row[]>));
      return finish(results);
    })() as MaybePromise<number[], Sync>;
  }

  private encodeByTable(inputs: readonly PublishInput[]): EncodedGroup[] {
    const groups: EncodedGroup[] = [];
    let bytes = 0;
    inputs.forEach((input, position) => {
      const { outbox, row } = this.encode(input);
      bytes += row.payload.length + (row.headers?.length ?? 0);
      checkBatchBytes(bytes);
      let group = groups.find((g) => sameTable(g.table, outbox.table));
      if (group === undefined) {
        group = {
          table: outbox.table,
          rows: [],
          positions: [],
          partitions: new Map(),
          serialize: false,
          notify: false,
        };
        groups.push(group);
      }
      group.rows.push(row);
      group.positions.push(position);
      if (outbox.notify) {
        group.notify = true;
        const key = `${outbox.name}:${row.partition}`;
        if (!group.partitions.has(key))
          group.partitions.set(key, { outbox: outbox.name, partition: row.partition });
      }
      if (outbox.serializeWrites && this.adapter.dialect.capabilities.advisoryLocks) group.serialize = true;
    });
    return groups;
  }

  /**
   * One message, checked and encoded. Whatever the input's own code throws on the way (a getter, a
   * Proxy, a `toJSON`, `publishHeaders`) is reported as `INVALID_MESSAGE`: nothing was sent.
   */
  private encode(input: PublishInput): { outbox: ResolvedOutbox; row: InsertRow } {
    if (typeof input !== 'object' || input === null)
      throw invalidOption('messages', 'messages made by defineMessage or { outbox, payload } objects', input);
    try {
      const outbox = this.outbox(input.outbox);
      const options = { groupKey: input.groupKey, headers: input.headers, type: input.type };
      const shared = this.publishHeaders?.();
      const row = encodeMessage(outbox, input.payload, options, this.adapter.dialect.capabilities, shared);
      return { outbox, row };
    } catch (error) {
      if (isOutboxerError(error)) throw error;
      throw new OutboxerError(
        'INVALID_MESSAGE',
        `Reading the message to publish threw: ${describeError(error, 500)}. Nothing was written.`,
        { cause: error },
      );
    }
  }

  private mapResult<T, U>(value: MaybePromise<T, Sync>, fn: (value: T) => U): MaybePromise<U, Sync> {
    if (this.adapter.sync) return fn(value as T) as MaybePromise<U, Sync>;
    return (value as Promise<T>).then(fn) as MaybePromise<U, Sync>;
  }

  /**
   * Creates the tables and indexes of every configured outbox. Idempotent; concurrent calls from
   * several processes wait for each other. The same DDL is exported for your own migration tool.
   */
  async migrate(): Promise<void> {
    const { dialect } = this.adapter;
    const tables: QualifiedName[] = [];
    for (const outbox of this.outboxes.values()) {
      if (!tables.some((t) => sameTable(t, outbox.table))) tables.push(outbox.table);
    }
    await checkServerVersion(this.adapter);
    const statements = [
      ...dialect.migrationLock(),
      ...tables.flatMap((t) => dialect.schema(t)).map((text) => ({ text, values: [] })),
    ];
    await this.adapter.executeAtomically(statements);
  }

  /**
   * Starts delivering: takes this node's share of every outbox's partitions and relays them.
   * Does nothing on a publish-only instance (`relay: false`) or in manual testing mode.
   */
  async start(): Promise<void> {
    if (!this.settings.relay || this.settings.testing === 'manual') return;
    if (this.state !== 'idle')
      throw new OutboxerError('INVALID_STATE', `start() called while outboxer is ${this.state}.`);
    this.state = 'starting';
    try {
      await checkConfigurations(this.adapter, [...this.outboxes.values()], this.logger);
      await this.startRelays();
      await this.listenForNotifications();
      for (const outbox of this.outboxes.values()) {
        const coordinator = new OutboxCoordinator(this.workerDeps(outbox), this.nodeId, () =>
          this.pruneAll(outbox),
        );
        this.coordinators.set(outbox.name, coordinator);
        await coordinator.start();
      }
      this.state = 'running';
    } catch (error) {
      this.state = 'running';
      await this.stop();
      throw error;
    }
  }

  private workerDeps(outbox: ResolvedOutbox): WorkerDeps {
    return {
      adapter: this.adapter as DatabaseAdapter<unknown, boolean>,
      outbox,
      relay: outbox.relay!,
      instance: this.settings.name,
      leaseTimeout: this.settings.leaseTimeout,
      maxErrorLength: this.settings.maxErrorLength,
      logger: this.logger,
    };
  }

  /** Starts each relay once; a relay whose start failed is tried again next time, and is not stopped. */
  private startRelays(): Promise<void> {
    this.relaysStarted ??= (async () => {
      for (const relay of new Set([...this.outboxes.values()].map((o) => o.relay!))) {
        if (this.startedRelays.has(relay)) continue;
        await relay.start?.();
        this.startedRelays.add(relay);
      }
    })().finally(() => {
      this.relaysStarted = undefined;
    });
    return this.relaysStarted;
  }

  private async listenForNotifications(): Promise<void> {
    const notifying = [...this.outboxes.values()].some((o) => o.notify);
    if (!notifying || this.adapter.listen === undefined) return;
    const prefix = `${this.settings.name}:`;
    this.listener = await this.adapter.listen(NOTIFY_CHANNEL, {
      onNotification: (payload) => {
        if (!payload.startsWith(prefix)) return;
        const rest = payload.slice(prefix.length);
        const split = rest.lastIndexOf(':');
        this.coordinators.get(rest.slice(0, split))?.wake(Number(rest.slice(split + 1)));
      },
      onStatus: (connected, error) => {
        if (connected) {
          // Wake everyone: notifications sent while we were away are lost.
          for (const coordinator of this.coordinators.values())
            for (const worker of coordinator.workers.values()) worker.wake();
        } else {
          this.logger.warn('outboxer: notification listener disconnected; polling until it is back', {
            error: describeError(error, this.settings.maxErrorLength),
          });
        }
      },
    });
  }

  /**
   * Stops gracefully: every batch in flight is finished and settled (or, past `shutdownTimeout`,
   * abandoned unacknowledged), partitions are handed back, relays disconnected.
   */
  async stop(): Promise<void> {
    if (this.state === 'idle' || this.state === 'stopping') return;
    this.state = 'stopping';
    // Every step is bounded: with the database or a broker hanging, stop() still returns (the
    // leases then lapse by themselves after leaseTimeout).
    const { shutdownTimeout } = this.settings;
    try {
      const coordinators = [...this.coordinators.values()];
      this.coordinators.clear();
      const stopped = await settlesWithin(
        Promise.all(coordinators.map((c) => c.stop(shutdownTimeout))),
        shutdownTimeout + 2000,
      );
      if (!stopped)
        this.logger.warn('outboxer: stop() gave up waiting for the database; leases will lapse on their own');
      const listener = this.listener;
      this.listener = undefined;
      if (listener !== undefined) await settlesWithin(listener.close(), 1000);
      await settlesWithin(this.stopRelays(), shutdownTimeout);
    } finally {
      this.state = 'idle';
    }
  }

  private async stopRelays(): Promise<void> {
    await this.relaysStarted?.catch(() => undefined);
    const started = [...this.startedRelays];
    this.startedRelays.clear();
    for (const relay of started) await relay.stop?.();
  }

  /**
   * `{ pending, delivered, dead, orphaned, relaySeenAt }` of an outbox, exact. On Postgres the
   * sum of the tallies each change writes with it (`<table>_tallies`, see `recountInterval`), a
   * few rows however deep the backlog; on SQLite a count of the rows. Call it from a metrics job,
   * not per request. Logs a warning when messages are pending but no relaying node was seen for
   * five lease periods (a silent backlog), or when rows are orphaned.
   */
  async counts(outbox: string, options: CountsOptions = {}): Promise<Counts> {
    const o = this.outbox(outbox);
    const { upTo } = options;
    if (upTo !== undefined && (!Number.isSafeInteger(upTo) || upTo < 1)) {
      throw invalidOption('upTo', 'a positive integer', upTo);
    }
    // Orphans are judged by what the workers read: the recorded count, not this instance's.
    const recorded = await readRecordedConfiguration(this.adapter as DatabaseAdapter<never, boolean>, o);
    const partitions = recorded?.partitions ?? o.partitions;
    const [row] = await this.adapter
      .execute(this.adapter.dialect.counts(o.table, o.name, partitions, upTo))
      .catch((error: unknown) => {
        throw explainMissingSchema(this.adapter.dialect, o.table, error);
      });
    const seen = row?.relay_seen_at;
    const oldest = row?.oldest_pending_at;
    const figures = {
      pending: Number(row?.pending ?? 0),
      delivered: Number(row?.delivered ?? 0),
      dead: Number(row?.dead ?? 0),
      orphaned: Number(row?.orphaned ?? 0),
    };
    const cap = upTo ?? Infinity;
    const counts: Counts = {
      pending: Math.min(figures.pending, cap),
      delivered: Math.min(figures.delivered, cap),
      dead: Math.min(figures.dead, cap),
      orphaned: Math.min(figures.orphaned, cap),
      relaySeenAt: toDate(seen),
      oldestPendingAt: toDate(oldest),
      exact: Object.values(figures).every((n) => n < cap),
    };
    this.warnAbout(o, counts, partitions);
    return counts;
  }

  private warnAbout(outbox: ResolvedOutbox, counts: Counts, partitions: number): void {
    const silentFor = counts.relaySeenAt === null ? Infinity : Date.now() - counts.relaySeenAt.getTime();
    if (counts.pending > 0 && silentFor > 5 * this.settings.leaseTimeout) {
      this.logger.warn(
        'outboxer: messages are pending but no relaying node has been seen; run at least one instance with relay: true',
        { outbox: outbox.name, pending: counts.pending, relaySeenAt: counts.relaySeenAt },
      );
    }
    if (counts.orphaned > 0) {
      this.logger.warn(
        `outboxer: ${counts.orphaned} pending messages sit in partitions >= ${partitions}, which no worker reads`,
        { outbox: outbox.name },
      );
    }
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
  async blockedGroups(outbox: string, options: { limit?: number } = {}): Promise<BlockedGroup[]> {
    const o = this.outbox(outbox);
    const limit = listLimit(options.limit);
    const rows = await this.adapter.execute(
      this.adapter.dialect.blockedGroups(o.table, o.name, limit, o.onDead === 'park'),
    );
    return rows.map((row) => {
      const envelope = this.adapter.dialect.toEnvelope(row, o.name);
      return {
        groupKey: envelope.groupKey!,
        headId: envelope.id,
        parked: envelope.status === 3,
        attempts: envelope.attempts,
        lastError: envelope.lastError,
        blockedSince: envelope.failingSince,
        nextAttemptAt: envelope.nextAttemptAt,
        waiting: Number(row.waiting),
      };
    });
  }

  /** Messages waiting for delivery (ready, retrying or held), oldest first. `limit`: 1 to 10,000, default 100. */
  listPending(outbox: string, options: { limit?: number } = {}): Promise<Envelope[]> {
    return this.list(outbox, 'pending', options.limit);
  }

  /** Dead messages, oldest first. `limit`: 1 to 10,000, default 100. */
  listDead(outbox: string, options: { limit?: number } = {}): Promise<Envelope[]> {
    return this.list(outbox, 'dead', options.limit);
  }

  private async list(outbox: string, which: 'pending' | 'dead', requested: unknown): Promise<Envelope[]> {
    const o = this.outbox(outbox);
    const limit = listLimit(requested);
    const rows = await this.adapter.execute(this.adapter.dialect.list(o.table, o.name, which, limit));
    return rows.map((row) => {
      const { status: _s, blocked: _b, ...envelope } = this.adapter.dialect.toEnvelope(row, o.name);
      return envelope;
    });
  }

  /**
   * Makes dead messages pending again, keeping their ids (and so their place in their group);
   * all of them, or those in `ids`. Returns how many were revived. A revived message is sent when
   * next picked up, possibly after later messages of its group.
   */
  async retryDead(outbox: string, options: { ids?: readonly number[] } = {}): Promise<number> {
    const o = this.outbox(outbox);
    const ids = options.ids === undefined ? undefined : checkIds(options.ids);
    await this.agreeOnDeadMessages(o);
    const { dialect } = this.adapter;
    // Revived messages keep their ids, below the workers' cursors: the count makes them look.
    const first = rewind(dialect, o);
    const results = await this.adapter.executeAtomically([
      ...first,
      dialect.retryDead(o.table, o.name, ids, o.onDead === 'park'),
    ]);
    return results[first.length]!.length;
  }

  /** Removes messages for good (pending or dead); a group they blocked moves on. Returns how many were removed. */
  async discard(outbox: string, ids: readonly number[]): Promise<number> {
    const o = this.outbox(outbox);
    const { dialect } = this.adapter;
    const checked = checkIds(ids);
    await this.agreeOnDeadMessages(o);
    // A group that moves on gets its held messages back, below the workers' cursors: before any
    // later message of the group is polled, the count sends each worker back to the beginning.
    const first = rewind(dialect, o);
    const results = await this.adapter.executeAtomically([
      ...first,
      dialect.discard(o.table, o.name, checked),
      dialect.releaseOrphanedHolds(o.table, o.name, o.onDead === 'park'),
    ]);
    return results[first.length]!.length;
  }

  /** Once per outbox: this instance's `onDead` matches the relaying nodes' (see checkRecordedOnDead). */
  private async agreeOnDeadMessages(outbox: ResolvedOutbox): Promise<void> {
    if (this.onDeadChecked.has(outbox.name)) return;
    await checkRecordedOnDead(this.adapter as DatabaseAdapter<never, boolean>, outbox);
    this.onDeadChecked.add(outbox.name);
  }

  /** Deletes delivered rows past the retention window, in batches. Returns how many. The pruner calls it. */
  async prune(outbox: string, options: { onBatch?: (pruned: number) => void } = {}): Promise<number> {
    return this.pruneAll(this.outbox(outbox), options.onBatch);
  }

  private async pruneAll(
    outbox: ResolvedOutbox,
    onBatch?: (pruned: number) => void,
    batch = 10_000,
  ): Promise<number> {
    if (outbox.retention === 'delete') return 0;
    const started = performance.now();
    let total = 0;
    for (;;) {
      const results = await this.adapter.executeAtomically(
        this.adapter.dialect.prune(outbox.table, outbox.name, outbox.retention.keep, batch),
      );
      const pruned = Number(results[results.length - 1]![0]?.pruned ?? 0);
      total += pruned;
      onBatch?.(pruned);
      if (pruned < batch) break;
    }
    emit(channels.prune, () => ({
      instance: this.settings.name,
      outbox: outbox.name,
      pruned: total,
      duration: performance.now() - started,
    }));
    return total;
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
    await this.startRelays();
    const targets = outbox === undefined ? [...this.outboxes.values()] : [this.outbox(outbox)];
    const results: DrainResult[] = [];
    for (const target of targets)
      results.push(await drainOutbox(this.workerDeps(target), this.nodeId, options));
    return mergeDrainResults(results);
  }

  /** Ends manual testing mode's relays (`stop()` does it for running instances). */
  async close(): Promise<void> {
    await this.stop();
    await this.stopRelays();
  }
}

interface EncodedGroup {
  table: QualifiedName;
  rows: InsertRow[];
  positions: number[];
  /** The partitions written, by `outbox:partition` (for `notify`). */
  partitions: Map<string, { outbox: string; partition: number }>;
  serialize: boolean;
  notify: boolean;
}

function toDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  return value instanceof Date ? value : new Date(Number(value));
}

/**
 * The statement that sends the outbox's workers back to the beginning, first in a transaction
 * that makes messages ready below their cursors; none where polls keep no cursor.
 */
function rewind(dialect: Dialect, outbox: ResolvedOutbox): SqlQuery[] {
  return dialect.countRewind === undefined ? [] : [dialect.countRewind(outbox.table, outbox.name)];
}

function mergeDrainResults(results: DrainResult[]): DrainResult {
  return {
    delivered: results.flatMap((r) => r.delivered),
    retried: results.flatMap((r) => r.retried),
    dead: results.flatMap((r) => r.dead),
    pending: results.reduce((n, r) => n + r.pending, 0),
    rounds: Math.max(0, ...results.map((r) => r.rounds)),
  };
}
