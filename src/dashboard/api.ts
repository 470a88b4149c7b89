/**
 * What the page reads and does, as JSON-ready values: each read is a few cheap calls of the public
 * `Outboxer` API (`counts()`, `blockedGroupCounts()`, `partitions()`, `relayingNodes()`,
 * `blockedGroups({ limit, waiting: false, groupKeyPrefix })`, `findMessages()` a page at a time),
 * each change one call of `retryDead()` or `discard()`.
 */
import type { FoundMessage, MessageState } from '../core/api.js';
import type { Outboxer } from '../core/outboxer.js';
import { OutboxerError } from '../core/errors.js';
import { channels, emit } from '../core/telemetry.js';
import { History } from './history.js';
import type { DashboardAction, ResolvedDashboardOptions } from './options.js';

/** The calls of an `Outboxer` the dashboard makes: any instance, whatever its transaction type. */
export type DashboardSource = Pick<
  Outboxer<never, boolean>,
  | 'settings'
  | 'outboxNames'
  | 'outbox'
  | 'counts'
  | 'partitions'
  | 'relayingNodes'
  | 'blockedGroups'
  | 'blockedGroupCounts'
  | 'findMessages'
  | 'retryDead'
  | 'discard'
>;

/**
 * Blocked groups the page lists, oldest head first, and the most a search by group-key prefix
 * returns (the database searches all heads). Without the count of what waits behind each head,
 * which reads the group's pending rows.
 */
export const BLOCKED_SHOWN = 200;
/** Blocked groups counted per figure on Postgres and MySQL before the page says "at least". */
export const BLOCKED_COUNTED = 10_000;
/** Ids one change collects from a group, a page of `findMessages` at a time. */
const GROUP_PAGE = 1000;
/** Dead messages of one group a single retry or redrive revives at most. */
export const MAX_GROUP_IDS = 10_000;

const time = (date: Date | null) => (date === null ? null : date.getTime());

/** A message as the page receives it: dates as Unix milliseconds, fields redacted. */
export type PageMessage = ReturnType<DashboardApi['present']>;

export class DashboardApi {
  private readonly history: History;

  constructor(
    private readonly source: DashboardSource,
    private readonly options: ResolvedDashboardOptions,
  ) {
    const names = source.outboxNames();
    for (const name of options.outboxes ?? []) source.outbox(name); // UNKNOWN_OUTBOX at creation
    this.outboxes = options.outboxes ?? names;
    // Ten minutes at the refresh interval.
    this.history = new History(Math.ceil(600_000 / options.refreshInterval), options.refreshInterval / 2);
  }

  readonly outboxes: readonly string[];

  /** Checks an outbox name from a request against the outboxes shown. */
  checkOutbox(name: unknown): string {
    if (typeof name !== 'string' || !this.outboxes.includes(name)) {
      throw new OutboxerError('UNKNOWN_OUTBOX', `Unknown outbox ${JSON.stringify(name)}.`);
    }
    return name;
  }

  /** Every outbox's figures, blocked groups, partitions and nodes, and the samples of the chart. */
  async overview() {
    const now = Date.now();
    const outboxes = await Promise.all(
      this.outboxes.map(async (name) => {
        const [counts, blockedCounts, partitions, nodes, blocked] = await Promise.all([
          this.source.counts(name),
          this.source.blockedGroupCounts(name, { upTo: BLOCKED_COUNTED }),
          this.source.partitions(name),
          this.source.relayingNodes(name),
          this.blocked(name),
        ]);
        this.history.add(name, {
          at: now,
          pending: counts.pending,
          dead: counts.dead,
          delivered: counts.delivered,
        });
        const o = this.source.outbox(name);
        return {
          name,
          onDead: o.onDead,
          keepsDelivered: o.retention !== 'delete',
          counts: {
            pending: counts.pending,
            delivered: counts.delivered,
            dead: counts.dead,
            orphaned: counts.orphaned,
            retryingGroups: blockedCounts.retrying,
            parkedGroups: blockedCounts.parked,
            // False past BLOCKED_COUNTED on Postgres and MySQL: the page shows "≥ N".
            blockedExact: blockedCounts.exact,
            blockedCapped: blocked.length === BLOCKED_SHOWN,
          },
          oldestPendingAt: time(counts.oldestPendingAt),
          relaySeenAt: time(counts.relaySeenAt),
          blocked,
          partitions: partitions.map((p) => ({ ...p, leaseUntil: time(p.leaseUntil) })),
          nodes: nodes.map((n) => ({ ...n, lastSeen: time(n.lastSeen) })),
          samples: this.history.list(name),
        };
      }),
    );
    return { now, outboxes };
  }

  /**
   * The oldest blocked groups of an outbox (at most {@link BLOCKED_SHOWN}); with `prefix`, those
   * whose group key starts with it, searched among all the heads by the database.
   */
  async blocked(outbox: string, prefix?: string) {
    const groups = await this.source.blockedGroups(outbox, {
      limit: BLOCKED_SHOWN,
      waiting: false,
      ...(prefix === undefined ? {} : { groupKeyPrefix: prefix }),
    });
    return groups.map((g) => ({
      ...g,
      // `redact` sees whole messages; a head's error alone is not shown past it (fail closed).
      lastError: this.options.redact === undefined ? g.lastError : null,
      blockedSince: time(g.blockedSince),
      nextAttemptAt: time(g.nextAttemptAt),
    }));
  }

  /** One page of pending or dead messages. */
  async messages(
    outbox: string,
    query: {
      status: 'pending' | 'dead';
      groupKey?: string;
      type?: string;
      error?: string;
      afterId?: number;
      limit?: number;
    },
  ) {
    const page = await this.source.findMessages(outbox, query);
    return { messages: page.messages.map((m) => this.present(m)), next: page.next };
  }

  /** One message by id (pending or dead), or `undefined`: two probes of one row each. */
  async message(outbox: string, id: number) {
    for (const status of ['pending', 'dead'] as const) {
      const page = await this.source.findMessages(outbox, { status, afterId: id - 1, limit: 1, scan: 1 });
      const found = page.messages[0];
      if (found?.id === id) return this.present(found);
    }
    return undefined;
  }

  present(m: FoundMessage) {
    const shown = this.options.redact?.(m) ?? {};
    return {
      id: m.id,
      outbox: m.outbox,
      type: m.type,
      groupKey: m.groupKey,
      partition: m.partition,
      state: m.state as MessageState,
      attempts: m.attempts,
      payload: 'payload' in shown ? shown.payload : m.payload,
      headers: shown.headers ?? m.headers,
      lastError: 'lastError' in shown ? (shown.lastError ?? null) : m.lastError,
      nextAttemptAt: time(m.nextAttemptAt),
      failingSince: time(m.failingSince),
      insertedAt: m.insertedAt.getTime(),
    };
  }

  /** `retryDead` of the ids given, or of every dead message of `group` (`redrive`: a parked group). */
  async retry(action: 'retry' | 'redrive', outbox: string, target: { ids?: number[]; group?: string }) {
    const ids = target.group === undefined ? target.ids : await this.deadIdsOf(outbox, target.group);
    const revived = ids === undefined || ids.length === 0 ? 0 : await this.source.retryDead(outbox, { ids });
    this.record(action, outbox, ids ?? [], target.group, revived);
    return { affected: revived };
  }

  async discard(outbox: string, ids: number[]) {
    const removed = await this.source.discard(outbox, ids);
    this.record('discard', outbox, ids, undefined, removed);
    return { affected: removed };
  }

  /** The dead messages of a group, in id order (the order a retry keeps). */
  private async deadIdsOf(outbox: string, group: string): Promise<number[]> {
    const ids: number[] = [];
    let afterId = 0;
    for (;;) {
      const page = await this.source.findMessages(outbox, {
        status: 'dead',
        groupKey: group,
        afterId,
        limit: GROUP_PAGE,
        scan: 100_000,
      });
      ids.push(...page.messages.map((m) => m.id));
      if (ids.length > MAX_GROUP_IDS) {
        throw new OutboxerError(
          'BATCH_TOO_LARGE',
          `Group ${JSON.stringify(group)} has over ${MAX_GROUP_IDS} dead messages: retry it in parts with the CLI or retryDead({ ids }).`,
        );
      }
      if (page.next === null) return ids;
      afterId = page.next;
    }
  }

  private record(
    action: DashboardAction,
    outbox: string,
    ids: number[],
    group: string | undefined,
    affected: number,
  ) {
    emit(channels.dashboardAction, () => ({
      instance: this.source.settings.name,
      outbox,
      action,
      ids,
      groupKey: group ?? null,
      affected,
    }));
  }
}
