import { OutboxerError } from '../../core/errors.js';
import { integerOption, invalidOption, rejectUnknownKeys } from '../../core/options.js';
import type { Envelope, Headers } from '../../core/relay.js';
import { standardHeaders } from '../shared/headers.js';
import type { BullmqJob, BullmqQueueLike } from './bullmq-queue.js';

/**
 * Options of one job, passed to BullMQ as they are: `attempts`, `backoff`, `removeOnComplete`…
 * `delay`, `priority` and `lifo` change the order jobs run in (fine with `ordering: 'none'`).
 * Default: none, the queue's `defaultJobOptions` apply.
 *
 * @example
 * bullmqRelay({ queue, jobOptions: { attempts: 1, removeOnComplete: { age: 3600 } } });
 */
export interface BullmqJobOptions {
  attempts?: number;
  delay?: number;
  priority?: number;
  lifo?: boolean;
  removeOnComplete?: boolean | number | { age?: number; count?: number };
  removeOnFail?: boolean | number | { age?: number; count?: number };
  [option: string]: unknown;
}

/**
 * What a job's `data` is by default: the payload, and the headers beside it.
 *
 * @example
 * new Worker<BullmqJobData<{ orderId: number }>>('orders', async (job) => ship(job.data.payload.orderId), { connection, concurrency: 1 });
 */
export interface BullmqJobData<P = unknown> {
  payload: P;
  /** The message's own headers plus `outboxer-id`, `outboxer-outbox`, `outboxer-type`, `outboxer-group-key`. */
  headers: Headers;
}

/**
 * Options of {@link bullmqRelay}; only `queue` is required.
 *
 * @example
 * bullmqRelay({ queue, jobName: (m) => m.type ?? 'event', timeout: 5000 });
 */
export interface BullmqRelayOptions {
  /** Your BullMQ `Queue`. The relay never closes it. */
  queue: BullmqQueueLike;
  /** Job name. Default: the message type, or the outbox name for a message without one. */
  jobName?: (envelope: Envelope) => string;
  /**
   * Job id: a redelivered message whose job still exists is ignored by BullMQ. Default
   * {@link defaultJobId}, `outboxer-<outbox>-<id>`. Must not contain `:` nor be an integer
   * (BullMQ rules). Include something else when two outbox tables feed one queue, since their
   * ids overlap: `(m) => \`billing-${m.outbox}-${m.id}\``.
   */
  jobId?: (envelope: Envelope) => string;
  /**
   * Job data. Default `{ payload, headers }` ({@link BullmqJobData}). Return `envelope.payload`
   * to give existing workers the bare payload (they then learn the outbox id from the job id only).
   */
  jobData?: (envelope: Envelope, headers: Headers) => unknown;
  /**
   * Options of every job (or a function of the message). Default: none, so the queue's
   * `defaultJobOptions` apply. `jobId`, `repeat`, `parent`, `deduplication` and `debounce` are
   * refused: the relay owns the job id, and the others drop or reshape jobs.
   */
  jobOptions?: BullmqJobOptions | ((envelope: Envelope) => BullmqJobOptions);
  /**
   * Default true: at most one job per group (per ordering key) in one `addBulk` call, so that a job
   * Redis refuses can never be overtaken by a later job of its group. BullMQ 6 sends `addBulk` as a
   * plain pipeline, not a transaction: the jobs after a refused one are added all the same. The
   * batch goes out in waves, wave n holding the n-th message of every group, a group stopping at its
   * first failure; a batch takes as many calls as its largest group has messages. False sends the
   * whole batch in one call (one round trip): faster when a batch is mostly one group (or in
   * `'total'` ordering), but after a refusal the later jobs of that group may already be queued
   * ahead of the retried one. See docs/relays/bullmq.md.
   */
  strictOrder?: boolean;
  /**
   * Milliseconds an `addBulk` call (and `start()`'s wait for the connection) may take before the
   * batch counts as failed. Default 10000. While Redis is down ioredis queues commands, so a
   * timed-out call can still land later; the job id makes that harmless.
   */
  timeout?: number;
  /** Shown in logs and telemetry. Default `'bullmq'`. */
  name?: string;
}

/** The options after validation, as the relay uses them (internal). */
export interface ResolvedBullmqOptions {
  readonly queue: BullmqQueueLike;
  readonly name: string;
  readonly timeout: number;
  /** One job per ordering key per `addBulk` call. */
  readonly strictOrder: boolean;
  /** Builds the job of one message; throws a retryable RELAY_MISCONFIGURED error for a bad job id or options. */
  readonly build: (envelope: Envelope) => BullmqJob;
}

const KEYS = [
  'queue',
  'jobName',
  'jobId',
  'jobData',
  'jobOptions',
  'strictOrder',
  'timeout',
  'name',
] as const;
const OWNED_JOB_OPTIONS = ['jobId', 'repeat', 'parent', 'deduplication', 'debounce'];

/**
 * The default job id: `outboxer-<outbox>-<id>`. Outbox names are `[A-Za-z0-9_.-]`, so it never
 * holds a `:` and is never an integer, as BullMQ requires.
 *
 * @example
 * defaultJobId({ outbox: 'orders', id: 42, ... }) // 'outboxer-orders-42'
 */
export function defaultJobId(envelope: Pick<Envelope, 'outbox' | 'id'>): string {
  return `outboxer-${envelope.outbox.replace(/[^A-Za-z0-9_.-]/g, '_')}-${envelope.id}`;
}

function defaultJobData(envelope: Envelope, headers: Headers): BullmqJobData {
  return { payload: envelope.payload, headers };
}

/** Validates the options once, in the factory. */
export function resolveBullmqOptions(raw: unknown): ResolvedBullmqOptions {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw invalidOption('bullmqRelay(options)', 'an object { queue, ... }', raw);
  }
  const options = raw as Record<string, unknown>;
  rejectUnknownKeys('bullmqRelay', options, KEYS);
  const queue = options.queue as BullmqQueueLike | undefined;
  if (typeof queue !== 'object' || queue === null || typeof queue.addBulk !== 'function') {
    throw invalidOption(
      'bullmqRelay.queue',
      'a BullMQ Queue (an object with an addBulk(jobs) method)',
      queue,
    );
  }
  const jobName =
    (optionalFunction('jobName', options.jobName) as BullmqRelayOptions['jobName']) ??
    ((m: Envelope) => m.type ?? m.outbox);
  const jobId = (optionalFunction('jobId', options.jobId) as BullmqRelayOptions['jobId']) ?? defaultJobId;
  const jobData =
    (optionalFunction('jobData', options.jobData) as BullmqRelayOptions['jobData']) ?? defaultJobData;
  const jobOptions = resolveJobOptions(options.jobOptions);
  const name = options.name ?? 'bullmq';
  if (typeof name !== 'string' || name.length === 0)
    throw invalidOption('bullmqRelay.name', 'a non-empty string', name);
  const strictOrder = options.strictOrder ?? true;
  if (typeof strictOrder !== 'boolean')
    throw invalidOption('bullmqRelay.strictOrder', 'true or false', strictOrder);
  const timeout = integerOption('bullmqRelay.timeout', options.timeout, 10_000, 1, 2 ** 31 - 1);
  const build = (envelope: Envelope): BullmqJob => {
    const id = checkJobId(jobId(envelope), envelope);
    const opts = jobOptions(envelope);
    return {
      name: checkJobName(jobName(envelope), envelope),
      data: jobData(envelope, standardHeaders(envelope)),
      opts: { ...opts, jobId: id },
    };
  };
  return Object.freeze({ queue, name, timeout, strictOrder, build });
}

function optionalFunction(option: string, value: unknown): unknown {
  if (value !== undefined && typeof value !== 'function')
    throw invalidOption(`bullmqRelay.${option}`, 'a function of the message', value);
  return value;
}

function resolveJobOptions(value: unknown): (envelope: Envelope) => BullmqJobOptions {
  if (value === undefined) return () => ({});
  if (typeof value === 'function') {
    return (envelope) =>
      checkJobOptions(value(envelope), `bullmqRelay.jobOptions returned for message ${envelope.id}`, true);
  }
  const fixed = Object.freeze(checkJobOptions(value, 'bullmqRelay.jobOptions', false));
  return () => fixed;
}

/** Refuses the options the relay owns or that drop jobs; at delivery time as a retryable misconfiguration. */
function checkJobOptions(value: unknown, path: string, atDelivery: boolean): BullmqJobOptions {
  const fail = (accepted: string): never => {
    if (!atDelivery) throw invalidOption(path, accepted, value);
    throw new OutboxerError(
      'RELAY_MISCONFIGURED',
      `${path} must be ${accepted}. Fix the jobOptions function.`,
      { retryable: true },
    );
  };
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return fail('an object of BullMQ job options');
  const owned = OWNED_JOB_OPTIONS.filter((key) => key in value);
  if (owned.length > 0) {
    return fail(
      `job options without ${owned.join(', ')} (the relay sets jobId from the outbox id; repeat, parent, deduplication and debounce would drop or reshape jobs)`,
    );
  }
  return value as BullmqJobOptions;
}

function checkJobId(value: unknown, envelope: Envelope): string {
  const ok =
    typeof value === 'string' &&
    value.length > 0 &&
    !value.includes(':') &&
    String(parseInt(value, 10)) !== value;
  if (ok) return value;
  throw new OutboxerError(
    'RELAY_MISCONFIGURED',
    `bullmqRelay.jobId returned ${JSON.stringify(value)} for message ${envelope.id} of outbox "${envelope.outbox}": a BullMQ job id must be a non-empty string without ":" that is not an integer. Fix the jobId option, e.g. (m) => \`orders-\${m.id}\`.`,
    { retryable: true },
  );
}

function checkJobName(value: unknown, envelope: Envelope): string {
  if (typeof value === 'string') return value;
  throw new OutboxerError(
    'RELAY_MISCONFIGURED',
    `bullmqRelay.jobName returned ${typeof value} for message ${envelope.id}; it must return a string.`,
    { retryable: true },
  );
}
