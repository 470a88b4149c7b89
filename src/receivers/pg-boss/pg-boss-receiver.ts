/**
 * The pg-boss receiver: a `work` handler that handles each job of a batch once through an inbox
 * in the consumer's transaction. pg-boss completes the batch when the handler resolves (after the
 * commits) and fails it, for a retry, when it throws. Structural: nothing of pg-boss is imported,
 * so that it fits pg-boss 10 and later (their handlers take an array of `{ id, name, data }`).
 */
import {
  InboxReceiver,
  type ReceivedMessage,
  type ReceiveOutcome,
  type ReceiverOptions,
} from '../../core/inbox/receiver.js';
import { invalidOption } from '../../core/options.js';
import { outboxIdOfJobId } from '../../relays/pg-boss/pg-boss-job-id.js';
import { jobIdentity } from '../shared/jobs.js';
import { receivedMessage } from '../shared/received.js';

/** What the receiver uses of a pg-boss job. */
export interface PgBossJobLike {
  readonly id: string;
  readonly name: string;
  readonly data: unknown;
}

/**
 * Options of {@link pgBossReceiver}: those of every receiver.
 *
 * @example
 * await boss.work('orders', pgBossReceiver({ outboxer, inbox: 'shipping', transaction, handler }));
 */
export type PgBossReceiverOptions<
  Raw,
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
> = ReceiverOptions<ReceivedMessage<Raw>, OutboxerTx, Sync, Tx, Raw>;

const WHAT = 'pgBossReceiver';

/** The relay's default job id (see `pgBossJobId`) carries the outbox id, not the outbox. */
function readJobId(jobId: string): { id: string } | undefined {
  const id = outboxIdOfJobId(jobId);
  return id === undefined ? undefined : { id: String(id) };
}

/**
 * A pg-boss `work` handler: `await boss.work(queue, pgBossReceiver({ … }))`. It handles the jobs
 * of the batch one after another, each once in your transaction, and resolves after the last
 * commit, so that pg-boss completes them only then. When one fails it throws without going on:
 * pg-boss fails the whole batch and retries it by the queue's `retryLimit` and `retryDelay`; the
 * jobs of the batch that had committed come back as duplicates, and are not handled twice. Resolves
 * to the inbox's outcome of each job, which pg-boss keeps as the jobs' output.
 *
 * The job's data is the relay's default `{ payload, headers }`, or the bare payload with the
 * relay's default job id; the handler's `payload` is the payload.
 *
 * @example
 * await boss.work('orders', { batchSize: 20 }, pgBossReceiver({ outboxer, inbox: 'shipping', transaction, handler }));
 */
export function pgBossReceiver<
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
  Raw extends PgBossJobLike = PgBossJobLike,
>(
  options: PgBossReceiverOptions<Raw, OutboxerTx, Sync, Tx>,
): (jobs: readonly Raw[]) => Promise<ReceiveOutcome[]> {
  const receiver = new InboxReceiver<ReceivedMessage<Raw>, Sync, Raw>(WHAT, options, []);
  return async (jobs) => {
    if (!Array.isArray(jobs))
      throw invalidOption(`${WHAT}(jobs)`, 'the array of jobs pg-boss passes to work()', jobs);
    const outcomes: ReceiveOutcome[] = [];
    for (const job of jobs) {
      const { identity, headers, body } = jobIdentity(
        { id: job.id, queue: job.name, data: job.data },
        receiver.source,
        readJobId,
      );
      outcomes.push(
        await receiver.receive(job, identity, (id) => ({
          ...receivedMessage(job, id, identity, headers, null),
          payload: body,
        })),
      );
    }
    return outcomes;
  };
}
