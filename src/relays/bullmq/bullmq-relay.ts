import { OutboxerError } from '../../core/errors.js';
import type { Relay } from '../../core/relay.js';
import { deliverInBulk, type BulkSender } from '../shared/bulk-delivery.js';
import { withDeadline } from '../shared/deadline.js';
import { deliverInWaves } from '../shared/waves.js';
import {
  BullmqCallAbandoned,
  deliveryErrorOf,
  failsWholeBatch,
  isCredentialsError,
} from './bullmq-errors.js';
import {
  resolveBullmqOptions,
  type BullmqRelayOptions,
  type ResolvedBullmqOptions,
} from './bullmq-options.js';
import type { BullmqJob } from './bullmq-queue.js';

/**
 * A relay that adds every message as a job to your BullMQ queue: one `addBulk` call per wave of the
 * batch (with `strictOrder`, the default, a wave holds at most one message per group; without it,
 * the whole batch is one call), a job id derived from the outbox id (a redelivery is ignored while
 * the job exists), the job name from the message type, and `{ payload, headers }` as the job's data.
 *
 * Jobs are added in outbox order, but BullMQ runs them in that order only with one worker at
 * concurrency 1 (or one queue per key, or BullMQ Pro groups). See docs/relays/bullmq.md.
 *
 * @example
 * import { Queue } from 'bullmq';
 * import { bullmqRelay } from 'outboxer/bullmq';
 * const queue = new Queue('orders', { connection: { host: '127.0.0.1', port: 6379 } });
 * const outboxer = new Outboxer({ database, outboxes: { orders: { relay: bullmqRelay({ queue }) } } });
 */
export function bullmqRelay(options: BullmqRelayOptions): Relay {
  const resolved = resolveBullmqOptions(options);
  const { queue, name } = resolved;
  let lastError: Error | undefined;
  const onError = (error: Error): void => {
    lastError = error;
  };

  return {
    name,
    async start() {
      lastError = undefined;
      queue.off?.('error', onError); // once, even if start() is called again
      queue.on?.('error', onError);
      try {
        await waitForConnection(resolved, () => lastError);
      } catch (error) {
        queue.off?.('error', onError); // outboxer does not stop a relay whose start() failed
        throw error;
      }
    },
    deliver(batch, context) {
      const sender: BulkSender<BullmqJob> = {
        build: resolved.build,
        async send(jobs, signal) {
          await addBulk(resolved, jobs, signal, () => lastError);
          lastError = undefined; // Redis answered: an older connection error says nothing now
        },
        failsWholeBatch,
        errorOf: (error, single) => deliveryErrorOf(error, queue.name, single?.opts?.jobId),
      };
      // addBulk is a pipeline, not a transaction: with strictOrder a call never holds two jobs of
      // one group, so the jobs after one Redis refuses cannot include a later job of its group.
      if (!resolved.strictOrder) return deliverInBulk(batch, context, sender);
      return deliverInWaves(batch, context, (wave) => deliverInBulk(wave, context, sender), { perKey: 1 });
    },
    async stop() {
      queue.off?.('error', onError);
    },
  };
}

function addBulk(
  options: ResolvedBullmqOptions,
  jobs: BullmqJob[],
  signal: AbortSignal,
  lastError: () => Error | undefined,
): Promise<readonly unknown[]> {
  const { queue, timeout } = options;
  return withDeadline(
    () => queue.addBulk(jobs),
    timeout,
    signal,
    () => {
      const last = lastError();
      return new BullmqCallAbandoned(
        `addBulk to BullMQ queue "${queue.name}" did not finish within ${timeout} ms${last === undefined ? '' : ` (last Redis error: ${last.message})`}. ` +
          'Its jobs may still be added once Redis answers; their job ids make the retry harmless.',
        last,
      );
    },
    (reason) =>
      new BullmqCallAbandoned(
        `addBulk to BullMQ queue "${queue.name}" was abandoned: ${reason instanceof Error ? reason.message : String(reason)}`,
        reason,
      ),
  );
}

/**
 * Waits up to `timeout` for the queue's connection. Bad credentials (which ioredis retries
 * forever) fail `start()` with RELAY_MISCONFIGURED; a Redis that does not answer yet does not:
 * it is treated as an outage, and messages wait in the outbox until it is back.
 */
async function waitForConnection(
  options: ResolvedBullmqOptions,
  lastError: () => Error | undefined,
): Promise<void> {
  const { queue, timeout } = options;
  if (typeof queue.waitUntilReady !== 'function') return;
  const failure = await new Promise<unknown>((resolve) => {
    const done = (error?: unknown): void => {
      clearInterval(poll);
      clearTimeout(timer);
      resolve(error);
    };
    // The relay's 'error' listener records what ioredis reports while it keeps retrying.
    const poll = setInterval(() => {
      const error = lastError();
      if (error !== undefined && isCredentialsError(error)) done(error);
    }, 10);
    const timer = setTimeout(done, timeout);
    queue.waitUntilReady!().then(
      () => done(),
      (error: unknown) => done(error ?? new Error('waitUntilReady() failed')),
    );
  });
  // ioredis reports a refused SELECT (database out of range) as an error, then carries on in database 0.
  const error = failure ?? lastError();
  if (error === undefined || (failure === undefined && !isCredentialsError(error))) return;
  throw new OutboxerError(
    'RELAY_MISCONFIGURED',
    `BullMQ queue "${queue.name}" cannot be used: ${error instanceof Error ? error.message : String(error)}. ` +
      (isCredentialsError(error)
        ? "Fix the queue's connection options (username, password, db)."
        : 'Pass an open queue, and close it only after outboxer.stop().'),
    { cause: error },
  );
}
