import { OutboxerError } from '../../core/errors.js';
import {
  orderingKey,
  type DeliveryContext,
  type DeliveryOutcome,
  type Envelope,
  type Ordering,
  type Relay,
} from '../../core/relay.js';
// The batch-then-one-by-one delivery is the same for every job queue (BullMQ's too).
import { deliverInBulk } from '../shared/bulk-delivery.js';
import { withDeadline } from '../shared/deadline.js';
import type { PgBoss10Like, PgBossJobInsert, PgBossLike, PgBossQueueInfo } from './pg-boss-client.js';
import { deliveryErrorOf, failsWholeBatch, misconfiguration, PgBossCallAbandoned } from './pg-boss-errors.js';
import {
  resolvePgBossOptions,
  type PgBossRelayOptions,
  type ResolvedPgBossOptions,
} from './pg-boss-options.js';

/** The pg-boss 12 policy that runs the jobs of one `singletonKey` one after another, in order. */
const STRICT_FIFO = 'key_strict_fifo';

/** One job and the queue it goes to. */
interface QueuedJob {
  readonly queue: string;
  readonly job: PgBossJobInsert;
}

/** What the check before a batch found about one queue. */
interface QueueState {
  readonly problem?: Error;
  readonly strictFifo: boolean;
}

/**
 * A relay that inserts every message as a job into your pg-boss queue (pg-boss 12, 11 or 10):
 * one `insert` per queue of a batch (a single statement: all or nothing), a job id derived from
 * the outbox id that is also ordered by it (a redelivery is ignored while the job is in the job
 * table), `{ payload, headers }` as the job's data, and the message's group key as the job's
 * pg-boss 12 `group`.
 *
 * On a pg-boss 12 `key_strict_fifo` queue every job gets the message's ordering key as its
 * `singletonKey`: pg-boss then runs a group's jobs one at a time in outbox order, across any
 * number of workers and nodes, a failed job's retries included. On any other queue jobs run in
 * outbox order only with one worker fetching one job at a time, and on pg-boss 12 not even then
 * for jobs of one batch. See docs/relays/pg-boss.md.
 *
 * @example
 * import { PgBoss } from 'pg-boss';
 * import { pgBossRelay } from 'outboxer/pg-boss';
 * const boss = new PgBoss(process.env.DATABASE_URL!);
 * await boss.start();
 * await boss.createQueue('orders', { policy: 'key_strict_fifo' });
 * const outboxer = new Outboxer({ database, outboxes: { orders: { relay: pgBossRelay({ boss, queue: 'orders' }) } } });
 */
export function pgBossRelay(options: PgBossRelayOptions): Relay {
  const resolved = resolvePgBossOptions(options);
  return {
    name: resolved.name,
    async start() {
      if (resolved.fixedQueue !== undefined) await checkQueueAtStart(resolved, resolved.fixedQueue);
    },
    deliver: (batch, context) => deliverBatch(resolved, batch, context),
  };
}

/**
 * The `singletonKey` of a message's job on a `key_strict_fifo` queue: the key outboxer orders it
 * by (the group key; the outbox's name under `ordering: 'total'`), else its own job id, which
 * orders it against nothing.
 */
function strictKey(envelope: Envelope, ordering: Ordering, jobId: string): string {
  const key = orderingKey(envelope, ordering);
  if (key === null) return jobId;
  return key === '' ? envelope.outbox : key;
}

async function deliverBatch(
  options: ResolvedPgBossOptions,
  batch: readonly Envelope[],
  context: DeliveryContext,
): Promise<DeliveryOutcome[]> {
  const names = new Set<string>();
  for (const envelope of batch) {
    try {
      names.add(options.queueOf(envelope));
    } catch {
      // build() throws the same error for this message.
    }
  }
  const label = [...names].map((name) => JSON.stringify(name)).join(', ');
  let queues: Map<string, QueueState>;
  try {
    queues = await checkQueues(options, names, context.signal);
  } catch (error) {
    throw deliveryErrorOf(error, label);
  }
  return deliverInBulk<QueuedJob>(batch, context, {
    build(envelope) {
      const queue = options.queueOf(envelope);
      const state = queues.get(queue)!;
      if (state.problem !== undefined) throw state.problem;
      const job = options.build(envelope);
      if (state.strictFifo) job.singletonKey = strictKey(envelope, context.ordering, job.id!);
      return { queue, job };
    },
    send: (jobs, signal) => call(options, `insert into queue ${label}`, () => insert(options, jobs), signal),
    failsWholeBatch,
    errorOf: (error, single) => deliveryErrorOf(error, label, single?.job.id),
  });
}

/**
 * pg-boss 10 takes a batch in one `insert(jobs)`. 11 and 12 take one queue per call: one call per
 * queue, in the order the queues first appear. A failure after the first call leaves the earlier
 * queues' jobs in; the batch is sent again, and their job ids make that harmless.
 */
async function insert(options: ResolvedPgBossOptions, jobs: readonly QueuedJob[]): Promise<void> {
  if (options.v10) {
    await (options.boss as PgBoss10Like).insert(jobs.map(({ queue, job }) => ({ ...job, name: queue })));
    return;
  }
  const byQueue = new Map<string, PgBossJobInsert[]>();
  for (const { queue, job } of jobs) {
    const list = byQueue.get(queue);
    if (list === undefined) byQueue.set(queue, [job]);
    else list.push(job);
  }
  for (const [queue, list] of byQueue) await (options.boss as PgBossLike).insert(queue, list);
}

/** One pg-boss call with the relay's timeout, abandoned when `signal` fires. */
function call<T>(
  options: ResolvedPgBossOptions,
  what: string,
  work: () => Promise<T>,
  signal: AbortSignal,
): Promise<T> {
  return withDeadline(
    work,
    options.timeout,
    signal,
    () =>
      new PgBossCallAbandoned(
        `pg-boss ${what} did not finish within ${options.timeout} ms. It may still commit; the job ids make the retry harmless.`,
      ),
    (reason) =>
      new PgBossCallAbandoned(
        `pg-boss ${what} was abandoned: ${reason instanceof Error ? reason.message : String(reason)}`,
        reason,
      ),
  );
}

/**
 * Looks up every queue of the batch: its policy (`key_strict_fifo` gets a `singletonKey` per job),
 * and whether jobs sent to it would be lost. pg-boss 10 joins inserted jobs with its queue table,
 * so a job for a missing queue vanishes without an error; the check makes it a failure instead
 * (only a queue deleted between the check and the insert slips through).
 */
async function checkQueues(
  options: ResolvedPgBossOptions,
  names: ReadonlySet<string>,
  signal: AbortSignal,
): Promise<Map<string, QueueState>> {
  const states = new Map<string, QueueState>();
  for (const name of names) {
    const info = await call(options, `getQueue("${name}")`, () => options.boss.getQueue(name), signal);
    const problem = queueProblem(name, info);
    states.set(name, {
      problem:
        problem === undefined
          ? undefined
          : new OutboxerError('RELAY_MISCONFIGURED', problem, { retryable: true }),
      strictFifo: info?.policy === STRICT_FIFO,
    });
  }
  return states;
}

/** Why jobs for this queue would be lost, or `undefined` when they would not. */
function queueProblem(name: string, info: PgBossQueueInfo | null | undefined): string | undefined {
  if (info === null || info === undefined) {
    return `pg-boss queue "${name}" does not exist (pg-boss 10 drops jobs for a missing queue without an error). Create it first: await boss.createQueue('${name}').`;
  }
  if (info.policy === 'short' || info.policy === 'stately' || info.policy === 'exclusive') {
    return `pg-boss queue "${name}" has the "${info.policy}" policy, which keeps one queued job and drops the others without an error: outboxer would lose messages. Use a queue with the standard or key_strict_fifo policy.`;
  }
  return undefined;
}

/**
 * A missing queue, a policy that drops jobs, a stopped PgBoss or missing pg-boss tables fail
 * `start()` with RELAY_MISCONFIGURED. A database that does not answer does not: that is an
 * outage, and messages wait in the outbox until it is back.
 */
async function checkQueueAtStart(options: ResolvedPgBossOptions, name: string): Promise<void> {
  let info: PgBossQueueInfo | null;
  try {
    info = await call(
      options,
      `getQueue("${name}")`,
      () => options.boss.getQueue(name),
      new AbortController().signal,
    );
  } catch (error) {
    const fix = misconfiguration(error);
    if (fix === undefined) return;
    throw new OutboxerError('RELAY_MISCONFIGURED', `pg-boss queue "${name}" cannot be used. ${fix}`, {
      cause: error,
    });
  }
  const problem = queueProblem(name, info);
  if (problem !== undefined) throw new OutboxerError('RELAY_MISCONFIGURED', problem);
}
