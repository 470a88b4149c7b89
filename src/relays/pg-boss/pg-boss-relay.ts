import { OutboxerError } from '../../core/errors.js';
import type { DeliveryOutcome, Envelope, Relay } from '../../core/relay.js';
// The batch-then-one-by-one delivery is the same for every job queue (BullMQ's too).
import { deliverInBulk } from '../shared/bulk-delivery.js';
import { withDeadline } from '../shared/deadline.js';
import type { PgBossJobInsert, PgBossQueueInfo } from './pg-boss-client.js';
import { deliveryErrorOf, failsWholeBatch, misconfiguration, PgBossCallAbandoned } from './pg-boss-errors.js';
import {
  resolvePgBossOptions,
  type PgBossRelayOptions,
  type ResolvedPgBossOptions,
} from './pg-boss-options.js';

/**
 * A relay that inserts every message as a job into your pg-boss 10 queue: one `insert` per batch
 * (a single statement: all or nothing), a job id derived from the outbox id that is also ordered
 * by it (so jobs inserted together come out of `fetch` in outbox order, and a redelivery is
 * ignored while the job is in the job table), and `{ payload, headers }` as the job's data.
 *
 * Jobs are fetched in outbox order, but run in that order only with one worker fetching one job
 * at a time (or the `singleton` queue policy). See docs/relays/pg-boss.md.
 *
 * @example
 * import PgBoss from 'pg-boss';
 * import { pgBossRelay } from 'outboxer/pg-boss';
 * const boss = new PgBoss(process.env.DATABASE_URL!);
 * await boss.start();
 * await boss.createQueue('orders');
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

async function deliverBatch(
  options: ResolvedPgBossOptions,
  batch: readonly Envelope[],
  context: Parameters<Relay['deliver']>[1],
): Promise<DeliveryOutcome[]> {
  const { boss } = options;
  const names = new Set<string>();
  for (const envelope of batch) {
    try {
      names.add(options.queueOf(envelope));
    } catch {
      // build() throws the same error for this message.
    }
  }
  const label = [...names].map((name) => JSON.stringify(name)).join(', ');
  let problems: Map<string, Error>;
  try {
    problems = await checkQueues(options, names, context.signal);
  } catch (error) {
    throw deliveryErrorOf(error, label);
  }
  return deliverInBulk<PgBossJobInsert>(batch, context, {
    build(envelope) {
      const queue = options.queueOf(envelope);
      const problem = problems.get(queue);
      if (problem !== undefined) throw problem;
      return options.build(envelope, queue);
    },
    send: async (jobs, signal) =>
      void (await call(options, `insert into queue ${label}`, () => boss.insert(jobs), signal)),
    failsWholeBatch,
    errorOf: (error, single) => deliveryErrorOf(error, label, single?.id),
  });
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
 * Looks up every queue of the batch. pg-boss 10 joins inserted jobs with its queue table, so a
 * job for a missing queue vanishes without an error; the check makes it a failure instead (only
 * a queue deleted between the check and the insert slips through).
 */
async function checkQueues(
  options: ResolvedPgBossOptions,
  names: ReadonlySet<string>,
  signal: AbortSignal,
): Promise<Map<string, Error>> {
  const problems = new Map<string, Error>();
  for (const name of names) {
    const info = await call(options, `getQueue("${name}")`, () => options.boss.getQueue(name), signal);
    const problem = queueProblem(name, info);
    if (problem !== undefined)
      problems.set(name, new OutboxerError('RELAY_MISCONFIGURED', problem, { retryable: true }));
  }
  return problems;
}

/** Why jobs for this queue would be lost, or `undefined` when they would not. */
function queueProblem(name: string, info: PgBossQueueInfo | null | undefined): string | undefined {
  if (info === null || info === undefined) {
    return `pg-boss queue "${name}" does not exist, and pg-boss 10 drops jobs for a missing queue without an error. Create it first: await boss.createQueue('${name}').`;
  }
  if (info.policy === 'short' || info.policy === 'stately') {
    return `pg-boss queue "${name}" has the "${info.policy}" policy, which keeps one queued job and drops the others without an error: outboxer would lose messages. Use a queue with the standard (or singleton) policy.`;
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
