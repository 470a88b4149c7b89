/**
 * The operator's calls: `counts`, `blockedGroups`, `listPending`, `listDead`, `retryDead`,
 * `discard` and `prune`. Each is a few statements of the dialect run on the adapter's own
 * connection, never inside the caller's transaction.
 */
import type { BlockedGroup, Counts, CountsOptions } from './api.js';
import { checkRecordedOnDead, readRecordedConfiguration } from './configuration.js';
import { run, runAtomically } from './database.js';
import type { Dialect } from './dialect.js';
import { explainMissingSchema } from './errors.js';
import type { Instance } from './instance.js';
import { checkIds, listLimit } from './limits.js';
import { invalidOption, type ResolvedOutbox } from './options.js';
import type { Envelope } from './relay.js';
import type { SqlQuery } from './sql.js';
import { queriesOf, readResults, Status } from './sql.js';
import { channels, emit } from './telemetry.js';

/** Rows one prune statement deletes at most: the pruner loops until a batch comes back short. */
const PRUNE_BATCH = 10_000;

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

  async blockedGroups(outbox: string, options: { limit?: number } = {}): Promise<BlockedGroup[]> {
    const o = this.instance.outbox(outbox);
    const limit = listLimit(options.limit);
    const heads = await run(
      this.adapter,
      this.adapter.dialect.blockedGroups(o.table, o.name, limit, o.onDead === 'park'),
    );
    return heads.map(({ head, waiting }) => ({
      groupKey: head.groupKey!,
      headId: head.id,
      parked: head.status === Status.dead,
      attempts: head.attempts,
      lastError: head.lastError,
      blockedSince: head.failingSince,
      nextAttemptAt: head.nextAttemptAt,
      waiting,
    }));
  }

  async list(outbox: string, which: 'pending' | 'dead', requested: unknown): Promise<Envelope[]> {
    const o = this.instance.outbox(outbox);
    const limit = listLimit(requested);
    const envelopes = await run(this.adapter, this.adapter.dialect.list(o.table, o.name, which, limit));
    return envelopes.map(({ status: _s, blocked: _b, ...envelope }) => envelope);
  }

  async retryDead(outbox: string, options: { ids?: readonly number[] } = {}): Promise<number> {
    const o = this.instance.outbox(outbox);
    const ids = options.ids === undefined ? undefined : checkIds(options.ids);
    await this.agreeOnDeadMessages(o);
    const { dialect } = this.adapter;
    // Revived messages keep their ids, below the workers' cursors: the count makes them look.
    const first = rewind(dialect, o);
    const revive = dialect.retryDead(o.table, o.name, ids, o.onDead === 'park', Date.now());
    const results = await this.adapter.executeAtomically([...first, ...queriesOf(revive)]);
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
    const results = await this.adapter.executeAtomically([
      ...first,
      ...removing,
      dialect.releaseOrphanedHolds(o.table, o.name, o.onDead === 'park'),
    ]);
    return readResults(remove, results.slice(first.length, first.length + removing.length));
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
      const pruned = await runAtomically(
        this.adapter,
        this.adapter.dialect.prune(outbox.table, outbox.name, outbox.retention.keep, PRUNE_BATCH, Date.now()),
      );
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
}

/**
 * The statement that sends the outbox's workers back to the beginning, first in a transaction
 * that makes messages ready below their cursors; none where polls keep no cursor.
 */
function rewind(dialect: Dialect, outbox: ResolvedOutbox): SqlQuery[] {
  return dialect.countRewind === undefined ? [] : [dialect.countRewind(outbox.table, outbox.name)];
}
