import type {
  LeaseToken,
  NextRetry,
  PollParams,
  PollResult,
  PolledEnvelope,
  PolledMessage,
} from '../dialect.js';
import { run } from '../database.js';
import { notifyPayload } from '../notifications.js';
import { isAcknowledgeOnly, type Settlement } from '../settlement.js';
import { Status } from '../sql.js';
import { advanceCursor, rewindBefore, type PollCursor } from './cursor.js';
import type { WorkerDeps } from './deps.js';
import { deliver } from './deliver.js';
import { leaseLost } from './lease-keeper.js';
import type { ReadyOnlyPolls } from './ready-only.js';
import { settle, settleParams } from './settle.js';

/** What one poll-deliver-settle round did. */
export interface RoundResult {
  /** No message could be delivered now. */
  readonly idle: boolean;
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
  /** An idle round's poll that also read the partition's next retry (see `PollResult.nextRetry`). */
  readonly nextRetry?: NextRetry | undefined;
}

export interface RoundOptions {
  readonly lease: LeaseToken;
  readonly cursor: PollCursor;
  readonly dueBefore: PollParams['dueBefore'];
  readonly signal: AbortSignal;
  /**
   * While a backlog drains, and where the dialect can (`acknowledgeAndPoll`), poll the next batch
   * while this one is delivered, in one statement with the previous batch's acknowledgement: the
   * database works while the relay does. What a round leaves for the next one stays in the
   * pipeline; the caller writes what it holds when it stops ({@link writeDeferred}) and drops it
   * after a failure. Without a pipeline, every round polls for itself and writes its own settlement.
   */
  readonly pipeline?: Pipeline;
  /** Where the dialect takes ready-only polls: whether to try one (see ready-only.ts). */
  readonly readyOnly?: ReadyOnlyPolls;
}

/**
 * What a draining partition carries from one round to the next: the batch polled while the
 * previous one was delivered, and that previous batch's acknowledge-only settlement, not written
 * yet, which the next statement writes with its poll. Both or neither: the poll ahead is kept only
 * when the batch delivered meanwhile was acknowledged whole.
 */
export class Pipeline {
  private carried: { readonly polled: PollResult; readonly deferred: Settlement } | undefined;

  /** What the previous round left, removed: the round that takes it writes the settlement. */
  take(): { readonly polled: PollResult; readonly deferred: Settlement } | undefined {
    const carried = this.carried;
    this.carried = undefined;
    return carried;
  }

  /** Leaves the next round the poll it is to use and this round's acknowledgement. */
  offer(polled: PollResult, deferred: Settlement): void {
    this.carried = { polled, deferred };
  }

  /** After a failure: what was not acknowledged is delivered again, from a fresh poll. */
  drop(): void {
    this.carried = undefined;
  }
}

/**
 * Rows read into envelopes per turn of the event loop (their headers parsed; a payload waits for
 * its first read, core/payload.ts): a large batch is not read in one go.
 */
const DECODE_SLICE = 200;

const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** One round: poll (unless the previous round did), hold blocked rows, deliver, settle. */
export async function runRound(deps: WorkerDeps, options: RoundOptions): Promise<RoundResult> {
  const { outbox } = deps;
  const carried = options.pipeline?.take();
  if (carried !== undefined)
    return { ...(await roundOf(deps, options, carried.polled, carried.deferred)), publishersQuiet: false };
  const checkPublishers = outbox.notify
    ? { checkPublishers: notifyPayload(deps.instance, outbox.name, options.lease.partition) }
    : {};
  const params = { ...pollParams(deps, options), ...checkPublishers };
  const readyOnly = options.readyOnly?.next() === true;
  let polled = await pollWith(deps, readyOnly ? { ...params, readyOnly } : params);
  options.readyOnly?.polled(readyOnly, polled.messages);
  if (readyOnly && polled.messages.length === 0) {
    polled = await pollWith(deps, params);
    options.readyOnly?.polled(false, polled.messages);
  }
  const publishersQuiet = outbox.notify && polled.publishersQuiet;
  return { ...(await roundOf(deps, options, polled, undefined)), publishersQuiet };
}

async function pollWith(deps: WorkerDeps, params: PollParams): Promise<PollResult> {
  const poll = deps.adapter.dialect.poll(deps.outbox.table, params);
  return poll.read(await deps.adapter.execute(poll));
}

/** The rest of a round, on its poll, with the previous round's deferred settlement to write. */
async function roundOf(
  deps: WorkerDeps,
  options: RoundOptions,
  poll: PollResult,
  deferred: Settlement | undefined,
): Promise<Omit<RoundResult, 'publishersQuiet'>> {
  const { adapter, outbox } = deps;
  const { cursor } = options;
  const limit = outbox.batchSize;
  const { start, messages: polled } = poll;
  if (start !== undefined) cursor.polled(start.afterId, start.rewinds);
  const full = polled.filter((m) => m.status === Status.ready).length >= limit;
  const blocked = polled.filter((m) => m.blocked);
  const chosen = polled.filter((m) => !m.blocked).slice(0, limit);
  advanceCursor(cursor, polled, chosen, start?.inFlight);
  if (blocked.length > 0) await hold(deps, options, blocked);
  if (chosen.length === 0 || options.signal.aborted) {
    const written = deferred === undefined || (await settle(deps, options, deferred));
    const idle = chosen.length === 0;
    // A deferred settlement written after the poll may have scheduled retries the poll could not see.
    const nextRetry = idle && deferred === undefined ? poll.nextRetry : undefined;
    return { idle, full, leaseLost: !written, settlement: undefined, nextRetry };
  }

  // The database's share of the round (writing the previous batch's acknowledgement, polling the
  // next batch) starts before this batch's payloads are parsed, and runs while the relay delivers.
  const database = watchFailure(
    databaseWork(
      deps,
      options,
      deferred,
      chosen.map((m) => m.id),
      full,
    ),
  );
  // A driver may send the statement on a later tick (pg's pool hands out its client in
  // process.nextTick): let it go out before the batch is decoded and delivered, or the database
  // waits for the relay instead of working alongside it (a draining relay is markedly faster).
  if (!adapter.sync) await yieldToLoop();
  const batch = await decode(chosen);
  // A large batch: let the loop breathe between decoding it, the relay's work and the settle.
  if (batch.length > DECODE_SLICE) await yieldToLoop();
  const settlement = await deliver(deps, options, batch, database.done);
  const concurrent = await database.settled();
  if (!concurrent.leaseHeld) return { idle: false, full, leaseLost: true, settlement };
  if (settlement === undefined) return { idle: false, full, leaseLost: false, settlement };
  if (batch.length > DECODE_SLICE) await yieldToLoop();
  // Messages left untouched behind a failure of their group stay ready, below the cursor.
  rewindBefore(cursor, settlement.skipped);
  const { pipeline } = options;
  const next = concurrent.next;
  if (
    pipeline !== undefined &&
    next !== undefined &&
    isAcknowledgeOnly(settlement) &&
    settlement.skipped.length === 0
  ) {
    pipeline.offer(next, settlement);
    // The next batch arrived with this one's settlement: when it is a large one, yield before
    // decoding and delivering it, so that the two do not run as one long stretch of the event
    // loop. A small batch is no long stretch, and a turn of the loop per batch costs a draining
    // relay a small but measurable share of its time.
    if (next.messages.length > DECODE_SLICE) await yieldToLoop();
    return { idle: false, full: true, leaseLost: false, settlement };
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

/**
 * Stopping with a delivered batch whose acknowledgement was to ride on the next poll: writes it.
 * Throws what the settle throws.
 */
export async function writeDeferred(
  deps: WorkerDeps,
  options: Pick<RoundOptions, 'lease' | 'cursor'> & { readonly pipeline: Pipeline },
): Promise<void> {
  const deferred = options.pipeline.take()?.deferred;
  if (deferred !== undefined) await settle(deps, options, deferred);
}

/**
 * Until the next poll: the poll interval, or less when a retry falls due sooner, and never more
 * than a third of the lease; `undefined` (until woken) while `notify` listens and no retry waits.
 * `known` is the next retry the idle round's poll read with it, where the dialect does; otherwise
 * it is read here.
 */
export async function idleDelay(
  deps: WorkerDeps,
  partition: number,
  known?: NextRetry,
): Promise<number | undefined> {
  const { outbox, leaseTimeout } = deps;
  // Sleeping until a notification: only a retry falling due bounds the sleep (the coordinator's
  // heartbeat renews the lease, and wakes the worker if it finds a message a notification missed).
  const untilNotified = outbox.notify && deps.listening?.() === true;
  const longest = untilNotified
    ? undefined
    : Math.min(outbox.pollInterval, Math.max(10, Math.floor(leaseTimeout / 3)));
  const next = known ?? (await readNextRetry(deps, partition));
  if (next.at === null) return longest;
  const now = Number.isNaN(next.now) ? Date.now() : next.now;
  return Math.max(0, Math.min(longest ?? MAX_TIMER, next.at - now));
}

async function readNextRetry({ adapter, outbox }: WorkerDeps, partition: number): Promise<NextRetry> {
  const statement = adapter.dialect.nextRetryAt(outbox.table, outbox.name, partition);
  return statement.read(await adapter.execute(statement));
}

/** The longest delay a Node.js timer takes (about 24.8 days); longer ones fire at once. */
const MAX_TIMER = 2 ** 31 - 1;

/** Moves ready rows behind a retrying (or parked) head of their group to `held`. */
async function hold(
  deps: WorkerDeps,
  options: Pick<RoundOptions, 'lease' | 'cursor'>,
  blocked: readonly PolledMessage[],
): Promise<void> {
  const { adapter, outbox } = deps;
  const { cursor } = options;
  const groups = [...new Set(blocked.map((m) => m.groupKey!))];
  const statement = adapter.dialect.hold(
    outbox.table,
    options.lease,
    blocked.map((m) => m.id),
    groups,
    outbox.onDead === 'park',
  );
  // A row whose blocking head went away meanwhile stays ready: poll it again.
  const heldIds = new Set(await run(adapter, statement));
  rewindBefore(
    cursor,
    blocked.filter((m) => !heldIds.has(m.id)),
  );
}

/** What the database did while the relay delivered: whether the lease held, and the next batch's poll. */
interface ConcurrentWork {
  readonly leaseHeld: boolean;
  readonly next?: PollResult;
}

/**
 * Starts the statement that runs during delivery: the previous batch's deferred acknowledgement
 * with the next poll (a full batch, on a dialect that can), or the acknowledgement alone, or the
 * poll alone. The poll leaves out the ids of both batches, which its snapshot may still show.
 */
async function databaseWork(
  deps: WorkerDeps,
  options: RoundOptions,
  deferred: Settlement | undefined,
  batchIds: readonly number[],
  full: boolean,
): Promise<ConcurrentWork> {
  const { adapter, outbox } = deps;
  const { dialect } = adapter;
  const ahead = full && options.pipeline !== undefined && dialect.acknowledgeAndPoll !== undefined;
  if (!ahead) {
    return { leaseHeld: deferred === undefined || (await settle(deps, options, deferred)) };
  }
  const exclude = [...(deferred?.delivered ?? []).map((m) => m.id), ...batchIds];
  const poll: PollParams = { ...pollParams(deps, options), exclude };
  if (deferred === undefined) {
    const statement = dialect.poll(outbox.table, poll);
    return { leaseHeld: true, next: statement.read(await adapter.execute(statement)) };
  }
  const statement = dialect.acknowledgeAndPoll!(
    outbox.table,
    settleParams(deps, options.lease, deferred),
    poll,
  );
  const next = statement.read(await adapter.execute(statement));
  return next === undefined ? { leaseHeld: leaseLost(deps, options.lease) } : { leaseHeld: true, next };
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

/** Reads the rows of a batch into envelopes, {@link DECODE_SLICE} per turn of the event loop. */
async function decode(polled: readonly PolledMessage[]): Promise<PolledEnvelope[]> {
  const envelopes: PolledEnvelope[] = [];
  for (let start = 0; start < polled.length; start += DECODE_SLICE) {
    if (start > 0) await yieldToLoop();
    const end = Math.min(polled.length, start + DECODE_SLICE);
    for (let i = start; i < end; i += 1) envelopes.push(polled[i]!.envelope());
  }
  return envelopes;
}

function pollParams(deps: WorkerDeps, options: RoundOptions): PollParams {
  return {
    now: Date.now(),
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
