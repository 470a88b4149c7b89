/**
 * The operator's calls: `counts`, `blockedGroups`, `listPending`, `listDead`, `findMessages`,
 * `partitions`, `relayingNodes`, `retryDead`, `discard` and `prune`. Each is a few statements of
 * the dialect run on the adapter's own connection, never inside the caller's transaction.
 */
import type {
  BlockedGroup,
  BlockedGroupCounts,
  BlockedGroupsOptions,
  Counts,
  CountsOptions,
  FindMessagesOptions,
  MessagePage,
  MessageState,
  NodeState,
  PartitionState,
} from './api.js';
import { checkRecordedOnDead, readRecordedConfiguration } from './configuration.js';
import { run, runAtomically } from './database.js';
import type { Dialect } from './dialect.js';
import { explainMissingSchema } from './errors.js';
import type { Instance } from './instance.js';
import { checkIds, listLimit } from './limits.js';
import { integerOption, invalidOption, rejectUnknownKeys, type ResolvedOutbox } from './options.js';
import { publicEnvelope } from './payload.js';
import type { Envelope } from './relay.js';
import type { SqlQuery } from './sql.js';
import { queriesOf, readResults, Status, type Batch, type StatusValue } from './sql.js';
import { channels, emit } from './telemetry.js';

/** Rows one prune statement deletes at most: the pruner loops until a batch comes back short. */
const PRUNE_BATCH = 10_000;

/**
 * How often an operator's change is run again after the database rolled it back to break a
 * deadlock with the relays (MySQL's settles and a discard can lock the same rows in two orders):
 * the change is one transaction of fixed statements, so running it again is safe.
 */
const CONFLICT_ATTEMPTS = 3;

export class Administration {
  private readonly onDeadChecked = new Set<string>();

  constructor(private readonly instance: Instance<unknown, boolean>) {}

  private get adapter() {
    return this.instance.engine;
  }

  async counts(outbox: string, options: CountsOptions = {}): Promise<Counts> {
    const o = this.instance.outbox(outbox);
    const { upTo } = options;
    if (upTo !== undefined && (!Number.isSafeInteger(upTo) || upTo < 1)) {
      throw invalidOption('upTo', 'a positive integer', upTo);
    }
    // Orphans are judged by what the workers read: the recorded count, not this instance's.
    const recorded = await readRecordedConfiguration(this.adapter, o);
    const partitions = recorded?.partitions ?? o.partitions;
    const figures = await run(
      this.adapter,
      this.adapter.dialect.counts(o.table, o.name, partitions, upTo),
    ).catch((error: unknown) => {
      throw explainMissingSchema(this.adapter.dialect, o.table, error);
    });
    const cap = upTo ?? Infinity;
    const { pending, delivered, dead, orphaned } = figures;
    const counts: Counts = {
      pending: Math.min(pending, cap),
      delivered: Math.min(delivered, cap),
      dead: Math.min(dead, cap),
      orphaned: Math.min(orphaned, cap),
      relaySeenAt: figures.relaySeenAt,
      oldestPendingAt: figures.oldestPendingAt,
      exact: [pending, delivered, dead, orphaned].every((n) => n < cap),
    };
    this.warnAbout(o, counts, partitions);
    return counts;
  }

  private warnAbout(outbox: ResolvedOutbox, counts: Counts, partitions: number): void {
    const { logger, settings } = this.instance;
    const silentFor = counts.relaySeenAt === null ? Infinity : Date.now() - counts.relaySeenAt.getTime();
    // Manual testing mode relays with drain(), never with a node: its backlog is expected.
    const relayExpected = settings.testing !== 'manual';
    if (relayExpected && counts.pending > 0 && silentFor > 5 * settings.leaseTimeout) {
      logger.warn(
        'outboxer: messages are pending but no relaying node has been seen; run at least one instance with relay: true',
        { outbox: outbox.name, pending: counts.pending, relaySeenAt: counts.relaySeenAt },
      );
    }
    if (counts.orphaned > 0) {
      logger.warn(
        `outboxer: ${counts.orphaned} pending messages sit in partitions >= ${partitions}, which no worker reads`,
        { outbox: outbox.name },
      );
    }
  }

  async blockedGroups(
    outbox: string,
    options: BlockedGroupsOptions & { waiting?: boolean } = {},
  ): Promise<BlockedGroup[]> {
    const o = this.instance.outbox(outbox);
    const limit = listLimit(options.limit);
    const { waiting: counted = true, groupKeyPrefix } = options;
    if (typeof counted !== 'boolean') throw invalidOption('waiting', 'true or false', counted);
    if (
      groupKeyPrefix !== undefined &&
      (typeof groupKeyPrefix !== 'string' || groupKeyPrefix.length === 0 || groupKeyPrefix.length > 1000)
    ) {
      throw invalidOption('groupKeyPrefix', 'a string of 1 to 1000 characters', groupKeyPrefix);
    }
    const heads = await run(
      this.adapter,
      this.adapter.dialect.blockedGroups(
        o.table,
        o.name,
        limit,
        o.onDead === 'park',
        counted,
        groupKeyPrefix,
      ),
    );
    return heads.map(({ head, waiting }) => ({
      groupKey: head.groupKey!,
      headId: head.id,
      parked: head.status === Status.dead,
      attempts: head.attempts,
      lastError: head.lastError,
      blockedSince: head.failingSince,
      nextAttemptAt: head.nextAttemptAt,
      ...(counted ? { waiting } : {}),
    })) as BlockedGroup[]; // without `waiting` when not counted: the facade's overload says so
  }

  async blockedGroupCounts(outbox: string, options: { upTo?: number } = {}): Promise<BlockedGroupCounts> {
    const o = this.instance.outbox(outbox);
    const upTo = integerOption('upTo', options.upTo, 10_000, 1, 1_000_000);
    // A dialect that keeps tallies ignores `upTo` and reports its figures in full, exact.
    const { retrying, parked, exact } = await run(
      this.adapter,
      this.adapter.dialect.blockedCounts(o.table, o.name, o.onDead === 'park', upTo),
    );
    return { retrying, parked, exact };
  }

  async list(outbox: string, which: 'pending' | 'dead', requested: unknown): Promise<Envelope[]> {
    const o = this.instance.outbox(outbox);
    const limit = listLimit(requested);
    const envelopes = await run(this.adapter, this.adapter.dialect.list(o.table, o.name, which, limit));
    return envelopes.map(publicEnvelope);
  }

  async findMessages(outbox: string, options: FindMessagesOptions): Promise<MessagePage> {
    const o = this.instance.outbox(outbox);
    const filter = checkFindOptions(options);
    const found = await run(this.adapter, this.adapter.dialect.findMessages(o.table, o.name, filter));
    const messages = found.messages.map((envelope) => ({
      ...publicEnvelope(envelope),
      state: STATES[envelope.status],
    }));
    const last = messages[messages.length - 1];
    const next =
      last !== undefined && messages.length === filter.limit
        ? last.id
        : found.scanned === filter.scan
          ? found.scannedTo
          : null;
    return { messages, next };
  }

  async partitions(outbox: string): Promise<PartitionState[]> {
    const o = this.instance.outbox(outbox);
    const recorded = await readRecordedConfiguration(this.adapter, o);
    const count = recorded?.partitions ?? o.partitions;
    const rows = await run(this.adapter, this.adapter.dialect.partitions(o.table, o.name, count, Date.now()));
    return rows.map((row) => ({ ...row, orphaned: row.partition >= count }));
  }

  async nodes(outbox: string): Promise<NodeState[]> {
    const o = this.instance.outbox(outbox);
    const ttl = this.instance.settings.leaseTimeout;
    const nodes = await run(this.adapter, this.adapter.dialect.nodes(o.table, o.name, ttl, Date.now()));
    return nodes.map((node) => ({ ...node, partitions: [...node.partitions] }));
  }

  async retryDead(outbox: string, options: { ids?: readonly number[] } = {}): Promise<number> {
    const o = this.instance.outbox(outbox);
    const ids = options.ids === undefined ? undefined : checkIds(options.ids);
    await this.agreeOnDeadMessages(o);
    const { dialect } = this.adapter;
    // Revived messages keep their ids, below the workers' cursors: the count makes them look.
    const first = rewind(dialect, o);
    const revive = dialect.retryDead(o.table, o.name, ids, o.onDead === 'park', Date.now());
    const results = await this.atomically([...first, ...queriesOf(revive)]);
    return readResults(revive, results.slice(first.length));
  }

  async discard(outbox: string, ids: readonly number[]): Promise<number> {
    const o = this.instance.outbox(outbox);
    const { dialect } = this.adapter;
    const checked = checkIds(ids);
    await this.agreeOnDeadMessages(o);
    // A group that moves on gets its held messages back, below the workers' cursors: before any
    // later message of the group is polled, the count sends each worker back to the beginning.
    const first = rewind(dialect, o);
    const remove = dialect.discard(o.table, o.name, checked);
    const removing = queriesOf(remove);
    const results = await this.atomically([
      ...first,
      ...removing,
      dialect.releaseOrphanedHolds(o.table, o.name, o.onDead === 'park'),
    ]);
    return readResults(remove, results.slice(first.length, first.length + removing.length));
  }

  /** Runs one transaction, again when the database broke a deadlock by rolling it back. */
  private async atomically(queries: readonly SqlQuery[]) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.adapter.executeAtomically(queries);
      } catch (error) {
        if (attempt >= CONFLICT_ATTEMPTS || !this.adapter.dialect.isConflict(error)) throw error;
      }
    }
  }

  /** Once per outbox: this instance's `onDead` matches the relaying nodes' (see checkRecordedOnDead). */
  private async agreeOnDeadMessages(outbox: ResolvedOutbox): Promise<void> {
    if (this.onDeadChecked.has(outbox.name)) return;
    await checkRecordedOnDead(this.adapter, outbox);
    this.onDeadChecked.add(outbox.name);
  }

  /** Deletes delivered rows past the retention window, in batches. Returns how many. */
  async prune(outbox: ResolvedOutbox, onBatch?: (pruned: number) => void): Promise<number> {
    if (outbox.retention === 'delete') return 0;
    const started = performance.now();
    let total = 0;
    for (;;) {
      const batch = this.adapter.dialect.prune(
        outbox.table,
        outbox.name,
        outbox.retention.keep,
        PRUNE_BATCH,
        Date.now(),
      );
      const pruned = await this.runPruneBatch(outbox, batch);
      total += pruned;
      onBatch?.(pruned);
      if (pruned < PRUNE_BATCH) break;
    }
    emit(channels.prune, () => ({
      instance: this.instance.settings.name,
      outbox: outbox.name,
      pruned: total,
      duration: performance.now() - started,
    }));
    return total;
  }

  private async runPruneBatch(outbox: ResolvedOutbox, batch: Batch<number>): Promise<number> {
    try {
      // One statement (Postgres) is atomic on its own: sent without BEGIN and COMMIT, one round
      // trip a batch instead of three (a prune of 500,000 rows makes fifty).
      return batch.length === 1
        ? batch.read([await this.adapter.execute(batch[0]!)])
        : await runAtomically(this.adapter, batch);
    } catch (error) {
      // Postgres prunes through a function migrate() creates: a schema older than this version.
      throw explainMissingSchema(this.adapter.dialect, outbox.table, error);
    }
  }
}

/**
 * The statement that sends the outbox's workers back to the beginning, first in a transaction
 * that makes messages ready below their cursors; none where polls keep no cursor.
 */
function rewind(dialect: Dialect, outbox: ResolvedOutbox): SqlQuery[] {
  return dialect.countRewind === undefined ? [] : [dialect.countRewind(outbox.table, outbox.name)];
}

const STATES: Record<StatusValue, MessageState> = {
  [Status.ready]: 'ready',
  [Status.retry]: 'retrying',
  [Status.held]: 'held',
  [Status.dead]: 'dead',
  [Status.delivered]: 'ready', // never listed: findMessages reads pending or dead rows only
};

const FIND_KEYS = ['status', 'groupKey', 'type', 'error', 'afterId', 'limit', 'scan'];

/** `findMessages`' options, checked, as the dialect's filter. */
function checkFindOptions(options: FindMessagesOptions) {
  if (typeof options !== 'object' || options === null) {
    throw invalidOption('', "an options object such as { status: 'dead' }", options);
  }
  rejectUnknownKeys('', options, FIND_KEYS);
  const { status, groupKey, type, error } = options;
  if (status !== 'pending' && status !== 'dead') throw invalidOption('status', "'pending' or 'dead'", status);
  for (const [name, value] of Object.entries({ groupKey, type, error })) {
    if (value !== undefined && (typeof value !== 'string' || value.length === 0 || value.length > 1000)) {
      throw invalidOption(name, 'a string of 1 to 1000 characters', value);
    }
  }
  return {
    which: status,
    afterId: integerOption('afterId', options.afterId, 0, 0, Number.MAX_SAFE_INTEGER),
    limit: listLimit(options.limit),
    scan: integerOption('scan', options.scan, 10_000, 1, 100_000),
    ...(groupKey === undefined ? {} : { groupKey }),
    ...(type === undefined ? {} : { type }),
    ...(error === undefined ? {} : { error }),
  };
}
