/**
 * The few parts of a BullMQ `Queue` the relay uses, described structurally so that
 * `outboxer/bullmq` imports nothing from `bullmq` when it is loaded.
 */

/**
 * Options of one job: the relay sets `jobId`; whatever else `BullmqRelayOptions.jobOptions`
 * holds (`attempts`, `removeOnComplete`…) goes to BullMQ untouched.
 */
export interface BullmqAddOptions {
  jobId?: string;
}

/** One job of an `addBulk` call, as the relay builds it. */
export interface BullmqJob {
  name: string;
  data: unknown;
  opts?: BullmqAddOptions;
}

/**
 * The part of a BullMQ `Queue` the relay calls. Pass your own queue; the relay never creates,
 * configures or closes it (close it yourself after `outboxer.stop()`).
 *
 * - `addBulk`: one call per batch (more only to single out a job BullMQ refuses).
 * - `waitUntilReady` (optional): awaited by `start()`, to catch bad credentials early.
 * - `on`/`off` (optional): the relay listens to `'error'` between `start()` and `stop()`, to
 *   recognise bad credentials and to name the last connection error in its own errors.
 *
 * Typed queues (`Queue<OrderData, void, 'paid' | 'shipped'>`) are accepted too.
 *
 * @example
 * import { Queue } from 'bullmq';
 * const queue: BullmqQueueLike = new Queue('orders', { connection: { host: '127.0.0.1', port: 6379 } });
 */
export interface BullmqQueueLike {
  readonly name: string;
  // Method syntax on purpose: BullMQ's generic `addBulk` is assignable to it (parameter bivariance).
  addBulk(jobs: BullmqJob[]): Promise<readonly unknown[]>;
  waitUntilReady?(): Promise<unknown>;
  on?(event: 'error', listener: (error: Error) => void): unknown;
  off?(event: 'error', listener: (error: Error) => void): unknown;
}
