import { OutboxerError } from '../../core/errors.js';
import { integerOption, invalidOption, rejectUnknownKeys } from '../../core/options.js';
import type { Envelope, Headers } from '../../core/relay.js';
import { standardHeaders } from '../shared/headers.js';
import type { PgBossJobInsert, PgBossJobOptions, PgBossLike } from './pg-boss-client.js';
import { pgBossJobId } from './pg-boss-job-id.js';

export type { PgBossJobOptions } from './pg-boss-client.js';

/**
 * What a job's `data` is by default: the payload, and the headers beside it.
 *
 * @example
 * await boss.work<PgBossJobData<{ orderId: number }>>('orders', { batchSize: 1 }, async ([job]) => ship(job!.data.payload.orderId));
 */
export interface PgBossJobData<P = unknown> {
  payload: P;
  /** The message's own headers plus `outboxer-id`, `outboxer-outbox`, `outboxer-type`, `outboxer-group-key`. */
  headers: Headers;
}

/**
 * Options of {@link pgBossRelay}; `boss` and `queue` are required.
 *
 * @example
 * pgBossRelay({ boss, queue: (m) => (m.type === 'Invoice' ? 'invoices' : 'orders'), timeout: 5000 });
 */
export interface PgBossRelayOptions {
  /** Your started `PgBoss` instance (pg-boss 10). The relay never starts or stops it. */
  boss: PgBossLike;
  /**
   * The queue every job goes to, or a function of the message (route by `envelope.type`…). The
   * queue must exist (`await boss.createQueue(name)`): a fixed name is checked by `start()`, and
   * every queue before each batch, because pg-boss drops jobs for a missing queue without a word.
   */
  queue: string | ((envelope: Envelope) => string);
  /**
   * Job data. Default `{ payload, headers }` ({@link PgBossJobData}). pg-boss wants an object;
   * the outbox id is in the job id too ({@link outboxIdOfJobId}).
   */
  jobData?: (envelope: Envelope, headers: Headers) => object;
  /** Options of every job (or a function of the message). Default: none; the queue's settings apply. */
  jobOptions?: PgBossJobOptions | ((envelope: Envelope) => PgBossJobOptions);
  /**
   * Mixed into every job id. Default `''`. Set it when two outbox tables (two services, say) with
   * the same outbox name feed one queue: their ids overlap, and pg-boss would drop the second
   * service's job as a duplicate of the first's.
   */
  idNamespace?: string;
  /** Milliseconds an insert (or a queue check) may take before the batch counts as failed. Default 10000. */
  timeout?: number;
  /** Shown in logs and telemetry. Default `'pg-boss'`. */
  name?: string;
}

/** The options after validation, as the relay uses them (internal). */
export interface ResolvedPgBossOptions {
  readonly boss: PgBossLike;
  /** The fixed queue name, when `queue` was a string. */
  readonly fixedQueue: string | undefined;
  readonly queueOf: (envelope: Envelope) => string;
  readonly timeout: number;
  readonly name: string;
  /** The job of one message (for `queue`, already resolved). Throws for a bad queue name or bad options. */
  readonly build: (envelope: Envelope, queue: string) => PgBossJobInsert;
}

const KEYS = ['boss', 'queue', 'jobData', 'jobOptions', 'idNamespace', 'timeout', 'name'] as const;
const JOB_OPTION_KEYS = [
  'priority',
  'retryLimit',
  'retryDelay',
  'retryBackoff',
  'startAfter',
  'expireInSeconds',
  'keepUntil',
  'deadLetter',
];

function defaultJobData(envelope: Envelope, headers: Headers): PgBossJobData {
  return { payload: envelope.payload, headers };
}

/** Validates the options once, in the factory. */
export function resolvePgBossOptions(raw: unknown): ResolvedPgBossOptions {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw invalidOption('pgBossRelay(options)', 'an object { boss, queue, ... }', raw);
  }
  const options = raw as Record<string, unknown>;
  rejectUnknownKeys('pgBossRelay', options, KEYS);
  const boss = options.boss as PgBossLike | undefined;
  if (
    typeof boss !== 'object' ||
    boss === null ||
    typeof boss.insert !== 'function' ||
    typeof boss.getQueue !== 'function'
  ) {
    throw invalidOption(
      'pgBossRelay.boss',
      'a PgBoss instance from pg-boss 10 (an object with insert(jobs) and getQueue(name) methods)',
      boss,
    );
  }
  const { queue } = options;
  if (!(typeof queue === 'function' || isQueueName(queue))) {
    throw invalidOption(
      'pgBossRelay.queue',
      'a queue name (a non-empty string, created with boss.createQueue) or a function of the message returning one',
      queue,
    );
  }
  const queueOf =
    typeof queue === 'function'
      ? checkedQueueOf(queue as (envelope: Envelope) => unknown)
      : () => queue as string;
  if (options.jobData !== undefined && typeof options.jobData !== 'function') {
    throw invalidOption(
      'pgBossRelay.jobData',
      'a function of the message returning an object',
      options.jobData,
    );
  }
  const jobData =
    (options.jobData as ((envelope: Envelope, headers: Headers) => unknown) | undefined) ?? defaultJobData;
  const jobOptions = resolveJobOptions(options.jobOptions);
  const namespace = options.idNamespace ?? '';
  if (typeof namespace !== 'string') throw invalidOption('pgBossRelay.idNamespace', 'a string', namespace);
  const name = options.name ?? 'pg-boss';
  if (typeof name !== 'string' || name.length === 0)
    throw invalidOption('pgBossRelay.name', 'a non-empty string', name);
  const timeout = integerOption('pgBossRelay.timeout', options.timeout, 10_000, 1, 2 ** 31 - 1);
  const build = (envelope: Envelope, queueName: string): PgBossJobInsert => ({
    ...jobOptions(envelope),
    id: pgBossJobId(envelope, namespace),
    name: queueName,
    data: checkData(jobData(envelope, standardHeaders(envelope)), envelope),
  });
  return Object.freeze({
    boss,
    fixedQueue: typeof queue === 'string' ? queue : undefined,
    queueOf,
    timeout,
    name,
    build,
  });
}

function isQueueName(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0;
}

function checkedQueueOf(queue: (envelope: Envelope) => unknown): (envelope: Envelope) => string {
  return (envelope) => {
    const value = queue(envelope);
    if (isQueueName(value)) return value;
    throw new OutboxerError(
      'RELAY_MISCONFIGURED',
      `pgBossRelay.queue returned ${JSON.stringify(value)} for message ${envelope.id}; it must return a queue name.`,
      { retryable: true },
    );
  };
}

function checkData(value: unknown, envelope: Envelope): object {
  if (typeof value === 'object' && value !== null) return value;
  throw new OutboxerError(
    'RELAY_MISCONFIGURED',
    `pgBossRelay.jobData returned ${typeof value} for message ${envelope.id}; pg-boss job data must be an object.`,
    { retryable: true },
  );
}

function resolveJobOptions(value: unknown): (envelope: Envelope) => PgBossJobOptions {
  if (value === undefined) return () => ({});
  if (typeof value === 'function') {
    return (envelope) =>
      checkJobOptions(value(envelope), `pgBossRelay.jobOptions returned for message ${envelope.id}`, true);
  }
  const fixed = Object.freeze(checkJobOptions(value, 'pgBossRelay.jobOptions', false));
  return () => fixed;
}

/**
 * Only the options listed in {@link PgBossJobOptions}: the relay owns `id`, `name` and `data`,
 * and `singletonKey`/`singletonSeconds` make pg-boss drop jobs that share a key, which would lose
 * messages without an error.
 */
function checkJobOptions(value: unknown, path: string, atDelivery: boolean): PgBossJobOptions {
  const accepted = `an object with only ${JOB_OPTION_KEYS.join(', ')} (the relay sets id, name and data; singleton options would drop jobs)`;
  const valid =
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.keys(value).every((key) => JOB_OPTION_KEYS.includes(key));
  if (valid) return value as PgBossJobOptions;
  if (!atDelivery) throw invalidOption(path, accepted, value);
  throw new OutboxerError(
    'RELAY_MISCONFIGURED',
    `${path} must be ${accepted}. Fix the jobOptions function.`,
    { retryable: true },
  );
}
