/**
 * The BullMQ receiver: a worker's processor that handles a job once through an inbox in the
 * consumer's transaction. BullMQ completes the job when the processor resolves (after the commit)
 * and retries it (its `attempts` and `backoff`) when it throws. Structural: nothing of bullmq is
 * imported.
 */
import {
  InboxReceiver,
  type ReceivedMessage,
  type ReceiveOutcome,
  type ReceiverOptions,
} from '../../core/inbox/receiver.js';
import { jobIdentity } from '../shared/jobs.js';
import { receivedMessage } from '../shared/received.js';

/** What the receiver uses of a BullMQ `Job`. */
export interface BullmqJobLike {
  readonly id?: string | undefined;
  readonly name: string;
  readonly data: unknown;
  readonly queueName: string;
}

/**
 * Options of {@link bullmqReceiver}: those of every receiver.
 *
 * @example
 * new Worker('orders', bullmqReceiver({ outboxer, inbox: 'shipping', transaction, handler }), { connection });
 */
export type BullmqReceiverOptions<
  Raw,
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
> = ReceiverOptions<ReceivedMessage<Raw>, OutboxerTx, Sync, Tx, Raw>;

const WHAT = 'bullmqReceiver';
const DEFAULT_JOB_ID = /^outboxer-([A-Za-z0-9_.-]+)-(\d+)$/;

/** The relay's default job id, `outboxer-<outbox>-<id>` (see `defaultJobId`). */
function readJobId(jobId: string): { id: string; outbox: string } | undefined {
  const found = DEFAULT_JOB_ID.exec(jobId);
  return found === null ? undefined : { outbox: found[1]!, id: found[2]! };
}

/**
 * A BullMQ processor: `new Worker(queue, bullmqReceiver({ … }), { connection })`. It handles each
 * job once in your transaction and resolves after the commit, so that BullMQ completes the job
 * only then; when anything fails it throws, and BullMQ retries the job by its `attempts` and
 * `backoff`. A job whose first run committed but did not complete (a stalled worker, a job added
 * again by a redelivery after the first was removed) is a duplicate: the handler is not called.
 * The job's return value is the inbox's outcome.
 *
 * The job's data is the relay's default `{ payload, headers }`, or the bare payload with the
 * relay's default job id `outboxer-<outbox>-<id>`; the handler's `payload` is the payload.
 *
 * @example
 * const worker = new Worker('orders', bullmqReceiver({ outboxer, inbox: 'shipping', transaction, handler }), { connection });
 */
export function bullmqReceiver<
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
  Raw extends BullmqJobLike = BullmqJobLike,
>(options: BullmqReceiverOptions<Raw, OutboxerTx, Sync, Tx>): (job: Raw) => Promise<ReceiveOutcome> {
  const receiver = new InboxReceiver<ReceivedMessage<Raw>, Sync, Raw>(WHAT, options, []);
  return (job) => {
    const { identity, headers, body } = jobIdentity(
      { id: job.id, queue: job.queueName, data: job.data },
      receiver.source,
      readJobId,
    );
    return receiver.receive(job, identity, (id) => ({
      ...receivedMessage(job, id, identity, headers, null),
      payload: body,
    }));
  };
}
