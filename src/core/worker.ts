import {
  Status,
  type DatabaseAdapter,
  type LeaseToken,
  type PollParams,
  type PollWatch,
  type PolledEnvelope,
  type Row,
  type SettleParams,
} from './database.js';
import { describeError, explainMissingSchema, LeaseLostError } from './errors.js';
import { notifyPayload } from './notifications.js';
import type { Logger } from './logger.js';
import type { ResolvedOutbox } from './options.js';
import type { DeliveryOutcome, Envelope, Relay } from './relay.js';
import { normalizeOutcomes, planSettlement, type Settlement } from './settlement.js';
import { channels, emit } from './telemetry.js';

export interface WorkerDeps {
  readonly adapter: DatabaseAdapter<unknown, boolean>;
  readonly outbox: ResolvedOutbox;
  readonly relay: Relay;
  readonly instance: string;
  readonly leaseTimeout: number;
  readonly maxErrorLength: number;
  readonly logger: Logger;
}

/**
 * A failure of an outbox's background work (polls, settles, coordination, pruning, tallies) as
 * logs and telemetry report it: a table or column migrate() has not created comes out as
 * SCHEMA_MISSING, which says so and what to run, with the database's error as its cause.
 */
export function backgroundFailure(deps: Pick<WorkerDeps, 'adapter' | 'outbox'>, error: unknown): unknown {
  return explainMissingSchema(deps.adapter.dialect, deps.outbox.table, error);
}

/** What one poll-deliver-settle round did. */
export interface RoundResult {
  /** No message could be delivered now. */
  readonly idle: boolean;
  /** The next round's poll, made while this round delivered (see {@link RoundOptions.pipeline}). */
  readonly next?: readonly Row[];
  /** This round's acknowledge-only settlement, left for the next round to write with its poll. */
  readonly deferred?: Settlement;
  /** The poll returned a full page of ready messages: poll again at once. */
  readonly full: boolean;
  readonly leaseLost: boolean;
  readonly settlement: Settlement | undefined;
  /**
   * `notify`: this round's own poll found no publisher in flight that had left its NOTIFY out,
   * tested once its snapshot was taken (see `PollParams.checkPublishers`). A publisher leaves its
   * NOTIFY out when another one in flight will send the same payload, so a worker may wait for a
   * notification only once it cannot have missed such a publisher: after a poll that follows a
   * quiet one, with no notification in between. (The snapshot's own list of transactions in
   * flight cannot tell: it leaves out those whose transaction id is above every completed one.)
   */
  readonly publishersQuiet: boolean;
}

/**
 * Poll position of a partition. Polls start after the last ready id handed out, so they never
 * step over the index entries that deleted rows leave behind until vacuum; a poll that finds less
 * than a full batch keeps the cursor too. They restart from the beginning after held rows were
 * released, when a statement outside the worker made messages ready below the cursor (it counts a
 * rewind on the lease row, which the poll reads: see `PollParams.rewindsSeen`), and at least once
 * per poll interval. Where the dialect keeps no cursor (`capabilities.pollCursor` false: SQLite,
 * whose deletes take their index entries with them), every poll starts from the beginning.
 *
 * A transaction in flight when the cursor moved past ids may commit messages below it later (ids
 * are drawn at insert, not at commit), and a later message of the same group could then be polled
 * first. So where the database reports them (Postgres), the cursor watches the transactions each
 * poll saw in flight when it moved on, and the first poll whose snapshot sees one of them ended
 * starts again from where the cursor was before that move (see docs/ordering.md, "the cursor").
 */
export class PollCursor {
  private afterId = 0;
  private restartedAt = Date.now();
  private rewinds: number | undefined;
  /** Transaction id → the cursor before the first move made while it was in flight. */
  private readonly watched = new Map<string, number>();

  constructor(
    private readonly restartEvery: number,
    private readonly keeps = true,
  ) {}

  next(): number {
    if (!this.keeps) return 0;
    if (Date.now() - this.restartedAt >= this.restartEvery) this.restart();
    return this.afterId;
  }

  /** Where the cursor stands, without the periodic restart. */
  current(): number {
    return this.afterId;
  }

  watch(): PollWatch {
    return { xids: [...this.watched.keys()], rewindTo: [...this.watched.values()] };
  }

  /** The lease row's rewind count as last polled. */
  rewindsSeen(): number | undefined {
    return this.rewinds;
  }

  /**
   * What a poll reported: where it really started (lower than asked when a watched transaction had
   * ended or a rewind was counted) and the rewind count it saw.
   */
  polled(startedAt: number, rewinds?: number): void {
    if (rewinds !== undefined) this.rewinds = rewinds;
    if (startedAt >= this.afterId) return;
    this.afterId = startedAt;
    for (const [xid, rewindTo] of this.watched) if (rewindTo >= startedAt) this.watched.delete(xid);
  }

  advance(to: number, inFlight: readonly string[] = [], from = this.afterId): void {
    if (!this.keeps || to <= this.afterId) return;
    for (const xid of inFlight) this.watched.set(xid, Math.min(this.watched.get(xid) ?? from, from));
    this.afterId = to;
  }

  rewind(to: number): void {
    this.afterId = Math.min(this.afterId, to);
  }

  restart(): void {
    this.afterId = 0;
    this.restartedAt = Date.now();
    this.watched.clear();
  }
}

export interface RoundOptions {
  readonly lease: LeaseToken;
  readonly cursor: PollCursor;
  readonly dueBefore: PollParams['dueBefore'];
  readonly signal: AbortSignal;
  /**
   * While a backlog drains, and where the dialect can (`acknowledgeAndPoll`), poll the next batch
   * while this one is delivered, in one statement with the previous batch's acknowledgement: the
   * database works while the relay does. The caller passes {@link RoundResult.next} and
   * {@link RoundResult.deferred} to the next round, and writes a deferred settlement it is left with.
   */
  readonly pipeline?: boolean;
  /** Rows a previous round polled while it delivered: used instead of polling. */
  readonly polled?: readonly Row[];
  /** The previous round's acknowledge-only settlement, not written yet. */
  readonly deferred?: Settlement;
}

/** One round: poll (unless the previous round did), hold blocked rows, deliver, settle. */
export async function runRound(deps: WorkerDeps, options: RoundOptions): Promise<RoundResult> {
  const { adapter, outbox } = deps;
  if (options.polled !== undefined)
    return { ...(await roundOf(deps, options, options.polled)), publishersQuiet: false };
  const checkPublishers = outbox.notify
    ? { checkPublishers: notifyPayload(deps.instance, outbox.name, options.lease.partition) }
    : {};
  const rows = await adapter.execute(
    adapter.dialect.poll(outbox.table, { ...pollParams(deps, options), ...checkPublishers }),
  );
  const publishersQuiet = outbox.notify && rows[0]?.publishers_quiet === true;
  return { ...(await roundOf(deps, options, rows)), publishersQuiet };
}

/** The rest of a round, on the rows of its poll. */
async function roundOf(
  deps: WorkerDeps,
  options: RoundOptions,
  rows: readonly Row[],
): Promise<Omit<RoundResult, 'publishersQuiet'>> {
  const { adapter, outbox } = deps;
  const { cursor } = options;
  const limit = outbox.batchSize;
  const start = pollStart(rows);
  if (start !== undefined) cursor.polled(start.afterId, start.rewinds);
  const polled = readPolled(rows);
  const full = polled.filter((m) => m.status === Status.ready).length >= limit;
  const blocked = polled.filter((m) => m.blocked);
  const chosen = polled.filter((m) => !m.blocked).slice(0, limit);
  advanceCursor(cursor, polled, chosen, start?.inFlight);
  if (blocked.length > 0) await hold(deps, options, blocked);
  if (chosen.length === 0 || options.signal.aborted) {
    const written = options.deferred === undefined || (await settle(deps, options, options.deferred));
    return { idle: chosen.length === 0, full, leaseLost: !written, settlement: undefined };
  }

  // The database's share of the round (writing the previous batch's acknowledgement, polling the
  // next batch) starts before this batch's payloads are parsed, and runs while the relay delivers.
  const database = watchFailure(
    databaseWork(
      deps,
      options,
      chosen.map((m) => m.id),
      full,
    ),
  );
  // A driver may send the statement on a later tick (pg's pool hands out its client in
  // process.nextTick): let it go out before the batch is decoded and delivered, or the database
  // waits for the relay instead of working alongside it (a draining relay: +15% at batch 100).
  if (!adapter.sync) await yieldToLoop();
  const batch = await decode(deps, chosen);
  // A large batch: let the loop breathe between decoding it, the relay's work and the settle.
  if (batch.length > DECODE_SLICE) await yieldToLoop();
  const settlement = await deliver(deps, options, batch, database.done);
  const concurrent = await database.settled();
  if (!concurrent.leaseHeld) return { idle: false, full, leaseLost: true, settlement };
  if (settlement === undefined) return { idle: false, full, leaseLost: false, settlement };
  if (batch.length > DECODE_SLICE) await yieldToLoop();
  // Messages left untouched behind a failure of their group stay ready, below the cursor.
  rewindBefore(cursor, settlement.skipped);
  const next = concurrent.next;
  if (next !== undefined && isAcknowledgeOnly(settlement) && settlement.skipped.length === 0) {
    return {
      idle: false,
      full: true,
      leaseLost: false,
      settlement,
      next,
      deferred: settlement,
    };
  }
  // The next batch was polled before this one's outcome was known: it may hold later messages of
  // a group that failed or was skipped here. Drop it: its rows stay ready, and since the cursor
  // never moved for them, the next poll reads them again.
  if (!(await settle(deps, options, settlement))) return { idle: false, full, leaseLost: true, settlement };
  return {
    idle: false,
    full: full || settlement.delivered.length > 0,
    leaseLost: false,
    settlement,
  };
}

/** What a round needs of a polled row before it parses the payload. */
interface PolledRow {
  readonly id: number;
  readonly status: number;
  readonly blocked: boolean;
  readonly groupKey: string | null;
  readonly row: Row;
}

/** Where a message stands, as the cursor sees it. */
type Positioned = Pick<PolledRow, 'id' | 'status' | 'blocked'>;

/** The message rows of a poll (not its row of nulls) in id order, without parsing payloads. */
function readPolled(rows: readonly Row[]): PolledRow[] {
  const polled: PolledRow[] = [];
  for (const row of rows) {
    if (row.id === null || row.id === undefined) continue;
    polled.push({
      id: Number(row.id),
      status: Number(row.status),
      blocked: row.blocked === true || row.blocked === 1,
      groupKey: (row.group_key as string | null) ?? null,
      row,
    });
  }
  // A poll returns its rows unsorted: retries due and ready rows come from two index scans.
  return polled.sort((a, b) => a.id - b.id);
}

/** Moves ready rows behind a retrying (or parked) head of their group to `held`. */
async function hold(
  deps: WorkerDeps,
  options: Pick<RoundOptions, 'lease' | 'cursor'>,
  blocked: readonly PolledRow[],
): Promise<void> {
  const { adapter, outbox } = deps;
  const { cursor } = options;
  const groups = [...new Set(blocked.map((m) => m.groupKey!))];
  const held = await adapter.execute(
    adapter.dialect.hold(
      outbox.table,
      options.lease,
      blocked.map((m) => m.id),
      groups,
      outbox.onDead === 'park',
    ),
  );
  // A row whose blocking head went away meanwhile stays ready: poll it again.
  const heldIds = new Set(held.map((row) => Number(row.id)));
  rewindBefore(
    cursor,
    blocked.filter((m) => !heldIds.has(m.id)),
  );
}

/** What the database did while the relay delivered: whether the lease held, and the next batch's rows. */
interface ConcurrentWork {
  readonly leaseHeld: boolean;
  readonly next?: readonly Row[];
}

/**
 * Starts the statement that runs during delivery: the previous batch's deferred acknowledgement
 * with the next poll (a full batch, on a dialect that can), or the acknowledgement alone, or the
 * poll alone. The poll leaves out the ids of both batches, which its snapshot may still show.
 */
async function databaseWork(
  deps: WorkerDeps,
  options: RoundOptions,
  batchIds: readonly number[],
  full: boolean,
): Promise<ConcurrentWork> {
  const { adapter, outbox } = deps;
  const { dialect } = adapter;
  const deferred = options.deferred;
  const ahead = full && options.pipeline === true && dialect.acknowledgeAndPoll !== undefined;
  if (!ahead) {
    return { leaseHeld: deferred === undefined || (await settle(deps, options, deferred)) };
  }
  const exclude = [...(deferred?.delivered ?? []).map((m) => m.id), ...batchIds];
  const poll: PollParams = { ...pollParams(deps, options), exclude };
  if (deferred === undefined)
    return { leaseHeld: true, next: await adapter.execute(dialect.poll(outbox.table, poll)) };
  const rows = await adapter.execute(
    dialect.acknowledgeAndPoll!(outbox.table, settleParams(deps, options.lease, deferred), poll),
  );
  return rows.length === 0 ? { leaseHeld: leaseLost(deps, options.lease) } : { leaseHeld: true, next: rows };
}

/**
 * A promise awaited only after the relay's work: marked as handled at once, so that a failure
 * meanwhile is not reported as unhandled, and rethrown when awaited.
 */
function watchFailure<T>(promise: Promise<T>): { done: Promise<unknown>; settled(): Promise<T> } {
  const outcome = promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  return {
    done: outcome,
    async settled() {
      const result = await outcome;
      if ('error' in result) throw result.error;
      return result.value;
    },
  };
}

/** Rows decoded per turn of the event loop: a batch of large payloads is not parsed in one go. */
const DECODE_SLICE = 200;

const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function decode(deps: WorkerDeps, polled: readonly PolledRow[]): Promise<PolledEnvelope[]> {
  const { dialect } = deps.adapter;
  const envelopes: PolledEnvelope[] = [];
  for (let start = 0; start < polled.length; start += DECODE_SLICE) {
    if (start > 0) await yieldToLoop();
    const end = Math.min(polled.length, start + DECODE_SLICE);
    for (let i = start; i < end; i += 1) envelopes.push(dialect.toEnvelope(polled[i]!.row, deps.outbox.name));
  }
  return envelopes;
}

function pollParams(deps: WorkerDeps, options: RoundOptions): PollParams {
  return {
    lease: options.lease,
    ordering: deps.outbox.ordering,
    limit: deps.outbox.batchSize,
    afterId: options.cursor.next(),
    watch: options.cursor.watch(),
    rewindsSeen: options.cursor.rewindsSeen(),
    dueBefore: options.dueBefore,
    parkDead: deps.outbox.onDead === 'park',
  };
}

interface PollStart {
  readonly afterId: number;
  readonly inFlight: readonly string[];
  readonly rewinds: number | undefined;
}

/** Where a poll started, what it saw in flight and the rewind count, on dialects that keep a cursor. */
function pollStart(rows: readonly Row[]): PollStart | undefined {
  const first = rows[0];
  if (first === undefined || first.after_id === undefined || first.after_id === null) return undefined;
  return {
    afterId: Number(first.after_id),
    inFlight: (first.in_flight as string[] | null) ?? [],
    rewinds: first.rewinds === undefined || first.rewinds === null ? undefined : Number(first.rewinds),
  };
}

/**
 * Moves the cursor past the ready rows a poll handed out, whether or not the batch was full: the
 * late-commit watch covers what commits below it, so the next poll does not walk the index
 * entries of the delivered rows again.
 */
function advanceCursor(
  cursor: PollCursor,
  polled: readonly Positioned[],
  batch: readonly Positioned[],
  inFlight: readonly string[] = [],
): void {
  const ready = polled.filter((m) => m.status === Status.ready);
  if (ready.length === 0) return;
  // Ready rows polled but left out of the batch come back next time: stop the cursor before them.
  const inBatch = new Set(batch.map((m) => m.id));
  const leftOut = ready.filter((m) => !m.blocked && !inBatch.has(m.id));
  const lastReady = Math.max(...ready.map((m) => m.id));
  cursor.advance(leftOut.length > 0 ? Math.min(...leftOut.map((m) => m.id)) - 1 : lastReady, inFlight);
}

function rewindBefore(cursor: PollCursor, messages: readonly Positioned[]): void {
  const ready = messages.filter((m) => m.status === 0);
  if (ready.length > 0) cursor.rewind(Math.min(...ready.map((m) => m.id)) - 1);
}

async function deliver(
  deps: WorkerDeps,
  options: RoundOptions,
  batch: PolledEnvelope[],
  databaseWork: Promise<unknown>,
): Promise<Settlement | undefined> {
  const { outbox, relay } = deps;
  const started = performance.now();
  emit(channels.batchStart, () => ({
    instance: deps.instance,
    outbox: outbox.name,
    partition: options.lease.partition,
    size: batch.length,
    messages: batch.map(publicEnvelope),
  }));

  const keeper = keepLeaseDuringDelivery(deps, options.lease, databaseWork);
  const signal = AbortSignal.any([options.signal, keeper.signal]);
  let result: { returned: readonly DeliveryOutcome[] | void } | { thrown: unknown };
  try {
    result = {
      returned: await relay.deliver(batch.map(publicEnvelope), {
        outbox: outbox.name,
        partition: options.lease.partition,
        ordering: outbox.ordering,
        signal,
      }),
    };
  } catch (error) {
    result = { thrown: error };
  } finally {
    await keeper.stop();
  }
  if (options.signal.aborted) {
    // Stopped mid-batch: acknowledge nothing; the next owner delivers the batch again.
    emit(channels.batchStop, () => ({
      instance: deps.instance,
      outbox: outbox.name,
      partition: options.lease.partition,
      size: batch.length,
      delivered: 0,
      failed: 0,
      aborted: true,
      duration: performance.now() - started,
    }));
    return undefined;
  }
  const settlement = planSettlement(batch, normalizeOutcomes(batch, result), outbox, deps.maxErrorLength);
  emit(channels.batchStop, () => ({
    instance: deps.instance,
    outbox: outbox.name,
    partition: options.lease.partition,
    size: batch.length,
    delivered: settlement.delivered.length,
    failed: settlement.failed.length,
    aborted: false,
    duration: performance.now() - started,
  }));
  return settlement;
}

/**
 * Renews the lease every `leaseTimeout / 3` while the relay works, for at most the outbox's
 * `deliveryTimeout`. The returned signal aborts when that time is up (the renewals stop, so a hung
 * relay loses its partition a lease period later) or when a renewal finds the partition taken.
 * The first renewal waits for the statement the round runs during delivery (a few milliseconds), so
 * that a partition never holds two pooled connections at once.
 */
function keepLeaseDuringDelivery(
  deps: WorkerDeps,
  lease: LeaseToken,
  databaseWork: Promise<unknown>,
): { signal: AbortSignal; stop(): Promise<void> } {
  const { adapter, outbox, leaseTimeout } = deps;
  const controller = new AbortController();
  let renewing: Promise<void> = databaseWork.then(() => undefined);
  const renew = () => {
    renewing = renewing.then(async () => {
      try {
        const rows = await adapter.execute(adapter.dialect.renewLease(outbox.table, lease, leaseTimeout));
        if (rows.length === 0) controller.abort(new LeaseLostError(outbox.name, lease.partition));
      } catch {
        // The database is unreachable: the settle will find out; the lease may run out meanwhile.
      }
    });
  };
  const interval = setInterval(renew, Math.max(10, Math.floor(leaseTimeout / 3)));
  const deadline = setTimeout(() => {
    clearInterval(interval);
    controller.abort(
      new Error(
        `delivery took longer than outboxes.${outbox.name}.deliveryTimeout (${outbox.deliveryTimeout} ms)`,
      ),
    );
  }, outbox.deliveryTimeout);
  return {
    signal: controller.signal,
    async stop() {
      clearInterval(interval);
      clearTimeout(deadline);
      await renewing;
    },
  };
}

/**
 * The relay sees the envelope without the engine's bookkeeping fields. Spelled out: a rest spread
 * that leaves out two keys cost a draining relay about 1% of its time.
 */
function publicEnvelope(m: PolledEnvelope): Envelope {
  return {
    id: m.id,
    outbox: m.outbox,
    type: m.type,
    groupKey: m.groupKey,
    partition: m.partition,
    payload: m.payload,
    headers: m.headers,
    attempts: m.attempts,
    lastError: m.lastError,
    nextAttemptAt: m.nextAttemptAt,
    failingSince: m.failingSince,
    insertedAt: m.insertedAt,
  };
}

function settleParams(deps: WorkerDeps, lease: LeaseToken, settlement: Settlement): SettleParams {
  return {
    lease,
    delivered: settlement.delivered.map((m) => m.id),
    failed: settlement.failed,
    unblockedGroups: settlement.unblockedGroups,
    keep: deps.outbox.retention !== 'delete',
    ttl: deps.leaseTimeout,
    parkDead: deps.outbox.onDead === 'park',
  };
}

/** Everything delivered, nothing failed, no group unblocked: the acknowledgement can ride on a poll. */
function isAcknowledgeOnly(settlement: Settlement): boolean {
  return (
    settlement.failed.length === 0 &&
    settlement.unblockedGroups.length === 0 &&
    settlement.delivered.length > 0
  );
}

/** Writes the settlement in one transaction fenced on the lease; false when the lease was lost. */
async function settle(
  deps: WorkerDeps,
  options: Pick<RoundOptions, 'lease' | 'cursor'>,
  settlement: Settlement,
): Promise<boolean> {
  const { lease } = options;
  const { adapter, outbox } = deps;
  const statements = adapter.dialect.settle(outbox.table, settleParams(deps, lease, settlement));
  // One statement (the common case) runs on its own: no BEGIN/COMMIT round trips.
  const results =
    statements.length === 1
      ? [await adapter.execute(statements[0]!)]
      : await adapter.executeAtomically(statements);
  if (results[0]!.length === 0) return leaseLost(deps, lease);
  reportSettlement(deps, lease, settlement, results, options.cursor);
  return true;
}

function leaseLost(deps: WorkerDeps, lease: LeaseToken): false {
  const { outbox } = deps;
  emit(channels.leaseLost, () => ({
    instance: deps.instance,
    outbox: outbox.name,
    partition: lease.partition,
    epoch: lease.epoch,
  }));
  deps.logger.warn('outboxer: partition taken over during delivery; the batch was not acknowledged', {
    outbox: outbox.name,
    partition: lease.partition,
  });
  return false;
}

/** Telemetry of a written settlement; moves the cursor back before rows released from `held`. */
function reportSettlement(
  deps: WorkerDeps,
  lease: LeaseToken,
  settlement: Settlement,
  results: Row[][],
  cursor: PollCursor,
): void {
  const { outbox } = deps;
  for (const groupKey of settlement.unblockedGroups) {
    emit(channels.groupUnblocked, () => ({
      instance: deps.instance,
      outbox: outbox.name,
      partition: lease.partition,
      groupKey,
    }));
  }
  if (settlement.unblockedGroups.length > 0) {
    const released = results[results.length - 1]!.map((row) => Number(row.id));
    if (released.length > 0) cursor.rewind(Math.min(...released) - 1);
  }
  for (const failure of settlement.failed) {
    if (settlement.newlyBlocked.includes(failure.envelope)) {
      emit(channels.groupBlocked, () => ({
        instance: deps.instance,
        outbox: outbox.name,
        partition: lease.partition,
        groupKey: failure.envelope.groupKey,
        headId: failure.id,
        parked: failure.dead,
        error: failure.error,
      }));
    }
    const channel = failure.dead ? channels.messageDead : channels.messageRetry;
    emit(channel, () => ({
      instance: deps.instance,
      outbox: outbox.name,
      partition: lease.partition,
      id: failure.id,
      groupKey: failure.envelope.groupKey,
      attempts: failure.envelope.attempts + 1,
      error: failure.error,
      ...(failure.dead ? {} : { delay: failure.delay }),
    }));
    if (failure.dead)
      deps.logger.warn('outboxer: message is dead', {
        outbox: outbox.name,
        id: failure.id,
        error: failure.error,
      });
  }
}

/**
 * Delivers one partition while it holds the lease: rounds back to back while there is work, a
 * wait of `pollInterval` (or until the next retry is due, or a NOTIFY) when there is none.
 */
export class PartitionWorker {
  private readonly stopController = new AbortController();
  private readonly cursor: PollCursor;
  private wakeUp: (() => void) | undefined;
  private woken = false;
  private lastRenewed = Date.now();
  private finished: Promise<void> | undefined;
  /** Set when the worker ended because another node owns the partition now. */
  lost = false;

  constructor(
    private readonly deps: WorkerDeps,
    readonly lease: LeaseToken,
  ) {
    this.cursor = new PollCursor(deps.outbox.pollInterval, deps.adapter.dialect.capabilities.pollCursor);
  }

  get partition(): number {
    return this.lease.partition;
  }

  start(): void {
    this.finished ??= this.loop();
  }

  /** Poll now (a NOTIFY arrived). */
  wake(): void {
    this.notifications += 1;
    this.woken = true;
    this.wakeUp?.();
  }

  private notifications = 0;
  private publishersBackoff = 1;

  /**
   * How long to wait before polling again for publishers in flight: 1 ms, doubling up to 50 ms (or
   * the poll interval): a publisher's transaction usually commits within a millisecond, but one
   * that publishes early in a long transaction must not make the worker poll flat out.
   */
  private untilPublishersCommit(): number {
    const delay = this.publishersBackoff;
    this.publishersBackoff = Math.min(this.publishersBackoff * 2, 50, this.deps.outbox.pollInterval);
    return delay;
  }

  /** Finish the batch in flight, then stop. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    await this.finished;
  }

  /** Abandon the batch in flight: it will not be acknowledged. */
  abort(): void {
    this.stopping = true;
    this.stopController.abort(new Error('outboxer is stopping'));
    this.wake();
  }

  get done(): Promise<void> {
    return this.finished ?? Promise.resolve();
  }

  private stopping = false;

  private async loop(): Promise<void> {
    const { outbox, logger } = this.deps;
    let failures = 0;
    let polled: readonly Row[] | undefined;
    let deferred: Settlement | undefined;
    /** The notifications counted when the last poll found publishers quiet (`notify`). */
    let quietAsOf: number | undefined;
    while (!this.stopping) {
      try {
        const notifications = this.notifications;
        const round = await runRound(this.deps, {
          lease: this.lease,
          cursor: this.cursor,
          dueBefore: null,
          signal: this.stopController.signal,
          pipeline: true,
          ...(polled === undefined ? {} : { polled }),
          ...(deferred === undefined ? {} : { deferred }),
        });
        polled = round.next;
        deferred = round.deferred;
        // The next batch arrived with this one's settlement: when it is a large one, yield before
        // decoding and delivering it, so that the two do not run as one long stretch of the event
        // loop. A small batch is no long stretch, and a turn of the loop per batch costs a draining
        // relay about 1%.
        if (polled !== undefined && polled.length > DECODE_SLICE) await yieldToLoop();
        failures = 0;
        if (round.settlement !== undefined && !round.leaseLost) this.lastRenewed = Date.now();
        if (round.leaseLost) {
          this.lost = true;
          return;
        }
        const mayRest = quietAsOf !== undefined && quietAsOf === this.notifications;
        quietAsOf = round.publishersQuiet ? notifications : undefined;
        if (round.settlement !== undefined) this.publishersBackoff = 1;
        if (round.full) continue;
        if (!(await this.renewIfDue())) return;
        if (outbox.notify && !mayRest) {
          // A publisher may have left its NOTIFY out to one this worker already received, and not
          // have committed yet: poll again soon rather than wait for a notification. Once a poll
          // finds publishers quiet, the next one may wait.
          if (quietAsOf === undefined) await this.sleep(this.untilPublishersCommit());
          continue;
        }
        this.publishersBackoff = 1;
        await this.sleep(await this.idleDelay());
      } catch (error) {
        // Database down or a statement failed: log, back off, try again. What was not acknowledged
        // (a deferred settlement included) is delivered again, so the next poll starts from the
        // beginning: the cursor may already be past rows this round neither delivered nor held.
        this.cursor.restart();
        polled = undefined;
        deferred = undefined;
        quietAsOf = undefined;
        failures += 1;
        const failure = backgroundFailure(this.deps, error);
        emit(channels.error, () => ({
          instance: this.deps.instance,
          outbox: outbox.name,
          partition: this.partition,
          error: failure,
        }));
        logger.error('outboxer: relay round failed; retrying', {
          outbox: outbox.name,
          partition: this.partition,
          error: describeError(failure, 500),
        });
        await this.sleep(Math.min(outbox.pollInterval * 2 ** Math.min(failures - 1, 6), 30_000));
        if (Date.now() - this.lastRenewed > this.deps.leaseTimeout) {
          this.lost = true; // Could not renew in time: another node may own it now.
          return;
        }
      }
    }
    if (deferred !== undefined) await this.writeOnStop(deferred);
  }

  /** Stopping with a delivered batch whose acknowledgement was to ride on the next poll: write it. */
  private async writeOnStop(settlement: Settlement): Promise<void> {
    try {
      await settle(this.deps, { lease: this.lease, cursor: this.cursor }, settlement);
    } catch (error) {
      // Not acknowledged: the partition's next owner delivers the batch again.
      this.deps.logger.error('outboxer: acknowledging the last batch failed on stop', {
        outbox: this.deps.outbox.name,
        partition: this.partition,
        error: describeError(backgroundFailure(this.deps, error), 500),
      });
    }
  }

  private async renewIfDue(): Promise<boolean> {
    if (Date.now() - this.lastRenewed < this.deps.leaseTimeout / 3) return true;
    const { adapter, outbox } = this.deps;
    const rows = await adapter.execute(
      adapter.dialect.renewLease(outbox.table, this.lease, this.deps.leaseTimeout),
    );
    if (rows.length === 0) {
      this.lost = true;
      emit(channels.leaseLost, () => ({
        instance: this.deps.instance,
        outbox: outbox.name,
        partition: this.partition,
        epoch: this.lease.epoch,
      }));
      return false;
    }
    this.lastRenewed = Date.now();
    return true;
  }

  /**
   * Until the next poll: the poll interval, or less when a retry falls due sooner, and never more
   * than a third of the lease, which the round after the sleep renews: a long `pollInterval` (with
   * `notify`, say) must not let the lease run out while the worker still counts on it.
   */
  private async idleDelay(): Promise<number> {
    const { adapter, outbox, leaseTimeout } = this.deps;
    const longest = Math.min(outbox.pollInterval, Math.max(10, Math.floor(leaseTimeout / 3)));
    const rows = await adapter.execute(
      adapter.dialect.nextRetryAt(outbox.table, outbox.name, this.partition),
    );
    const next = rows[0]?.next_attempt_at;
    if (next === null || next === undefined) return longest;
    const now = rows[0]!.now instanceof Date ? (rows[0]!.now as Date).getTime() : Date.now();
    const dueIn = (next instanceof Date ? next.getTime() : Number(next)) - now;
    return Math.max(0, Math.min(longest, dueIn));
  }

  private sleep(ms: number): Promise<void> {
    if (this.woken || this.stopping) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        this.woken = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeUp = done;
    });
  }
}
