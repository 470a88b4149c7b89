import { OutboxerError } from '../../core/errors.js';
import { integerOption, invalidOption, rejectUnknownKeys } from '../../core/options.js';
import type { Envelope, Headers } from '../../core/relay.js';
import { standardHeaders } from '../shared/headers.js';
import {
  isPgBoss10,
  type PgBoss10Like,
  type PgBossGroup,
  type PgBossJobInsert,
  type PgBossJobOptions,
  type PgBossLike,
} from './pg-boss-client.js';
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
  /** Your started `PgBoss` instance (pg-boss 12, 11 or 10). The relay never starts or stops it. */
  boss: PgBossLike | PgBoss10Like;
  /**
   * The queue every job goes to, or a function of the message (route by `envelope.type`…). The
   * queue must exist (`await boss.createQueue(name)`): a fixed name is checked by `start()`, and
   * every queue before each batch (pg-boss 10 drops jobs for a missing queue without a word). On a
   * `key_strict_fifo` queue (pg-boss 12) every job gets the message's ordering key as its
   * `singletonKey`, and pg-boss runs a key's jobs one after another, in outbox order, whatever the
   * number of workers: see docs/relays/pg-boss.md.
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
   * The job's pg-boss 12 `group` (which a worker's `groupConcurrency` limits). Default: the
   * message's group key (`{ id: envelope.groupKey }`, no group for a message without one).
   * A function maps a message to a group id, a `{ id, tier }` or `null`; `false` sets none.
   * pg-boss 11 ignores it and the relay does not send it to pg-boss 10. A group limits how many
   * of its jobs run at once; it does not keep their order (a `key_strict_fifo` queue does).
   *
   * @example
   * pgBossRelay({ boss, queue, group: (m) => m.headers.tenant ?? null }); // group by tenant
   */
  group?: false | ((envelope: Envelope) => string | PgBossGroup | null);
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
  readonly boss: PgBossLike | PgBoss10Like;
  /** True for pg-boss 10, whose `insert(jobs)` takes the queue in every job. */
  readonly v10: boolean;
  /** The fixed queue name, when `queue` was a string. */
  readonly fixedQueue: string | undefined;
  readonly queueOf: (envelope: Envelope) => string;
  readonly timeout: number;
  readonly name: string;
  /** The job of one message, without its queue. Throws for bad job data, job options or group. */
  readonly build: (envelope: Envelope) => PgBossJobInsert;
}

const KEYS = ['boss', 'queue', 'jobData', 'jobOptions', 'group', 'idNamespace', 'timeout', 'name'] as const;
const COMMON_JOB_OPTIONS = [
  'priority',
  'retryLimit',
  'retryDelay',
  'retryBackoff',
  'startAfter',
  'expireInSeconds',
];
/** What each line's `insert` reads (pg-boss 11 ignores `heartbeatSeconds` and `deadLetter`). */
const JOB_OPTION_KEYS = {
  current: [
    ...COMMON_JOB_OPTIONS,
    'retryDelayMax',
    'deleteAfterSeconds',
    'retentionSeconds',
    'heartbeatSeconds',
    'deadLetter',
  ],
  v10: [...COMMON_JOB_OPTIONS, 'keepUntil', 'deadLetter'],
} as const;

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
  const boss = options.boss as PgBossLike | PgBoss10Like | undefined;
  if (
    typeof boss !== 'object' ||
    boss === null ||
    typeof boss.insert !== 'function' ||
    typeof boss.getQueue !== 'function'
  ) {
    throw invalidOption(
      'pgBossRelay.boss',
      'a PgBoss instance from pg-boss 12, 11 or 10 (an object with insert and getQueue(name) methods)',
      boss,
    );
  }
  const v10 = isPgBoss10(boss);
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
  const jobOptions = resolveJobOptions(
    options.jobOptions,
    v10 ? JOB_OPTION_KEYS.v10 : JOB_OPTION_KEYS.current,
  );
  const groupOf = resolveGroup(options.group);
  const namespace = options.idNamespace ?? '';
  if (typeof namespace !== 'string') throw invalidOption('pgBossRelay.idNamespace', 'a string', namespace);
  const name = options.name ?? 'pg-boss';
  if (typeof name !== 'string' || name.length === 0)
    throw invalidOption('pgBossRelay.name', 'a non-empty string', name);
  const timeout = integerOption('pgBossRelay.timeout', options.timeout, 10_000, 1, 2 ** 31 - 1);
  const build = (envelope: Envelope): PgBossJobInsert => {
    const job: PgBossJobInsert = {
      ...jobOptions(envelope),
      id: pgBossJobId(envelope, namespace),
      data: checkData(jobData(envelope, standardHeaders(envelope)), envelope),
    };
    const group = v10 ? undefined : groupOf(envelope);
    if (group !== undefined) job.group = group;
    return job;
  };
  return Object.freeze({
    boss,
    v10,
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

function resolveJobOptions(
  value: unknown,
  keys: readonly string[],
): (envelope: Envelope) => PgBossJobOptions {
  if (value === undefined) return () => ({});
  if (typeof value === 'function') {
    return (envelope) =>
      checkJobOptions(
        value(envelope),
        keys,
        `pgBossRelay.jobOptions returned for message ${envelope.id}`,
        true,
      );
  }
  const fixed = Object.freeze(checkJobOptions(value, keys, 'pgBossRelay.jobOptions', false));
  return () => fixed;
}

/**
 * Only the options listed in {@link PgBossJobOptions} that this pg-boss line reads: the relay
 * owns `id`, `name`, `data` and `singletonKey` (which `singletonSeconds` and the `short`,
 * `stately` and `exclusive` policies use to drop jobs without an error).
 */
function checkJobOptions(
  value: unknown,
  keys: readonly string[],
  path: string,
  atDelivery: boolean,
): PgBossJobOptions {
  const accepted = `an object with only ${keys.join(', ')} (the options this pg-boss line reads; the relay sets id, name, data and singletonKey)`;
  const valid =
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.keys(value).every((key) => keys.includes(key));
  if (valid) return value as PgBossJobOptions;
  if (!atDelivery) throw invalidOption(path, accepted, value);
  throw new OutboxerError(
    'RELAY_MISCONFIGURED',
    `${path} must be ${accepted}. Fix the jobOptions function.`,
    { retryable: true },
  );
}

function defaultGroup(envelope: Envelope): string | null {
  return envelope.groupKey;
}

function resolveGroup(value: unknown): (envelope: Envelope) => PgBossGroup | undefined {
  if (value === false) return () => undefined;
  if (value !== undefined && typeof value !== 'function') {
    throw invalidOption(
      'pgBossRelay.group',
      'false or a function of the message returning a group id, { id, tier } or null',
      value,
    );
  }
  const groupOf = (value as ((envelope: Envelope) => unknown) | undefined) ?? defaultGroup;
  return (envelope) => checkGroup(groupOf(envelope), envelope);
}

/** pg-boss refuses an empty id or tier for the whole insert, so a bad one fails its message alone. */
function checkGroup(value: unknown, envelope: Envelope): PgBossGroup | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value === 'string' && value.length > 0) return { id: value };
  if (typeof value === 'object' && !Array.isArray(value)) {
    const { id, tier } = value as Record<string, unknown>;
    const keysOk = Object.keys(value).every((key) => key === 'id' || key === 'tier');
    if (keysOk && typeof id === 'string' && id.length > 0) {
      if (tier === undefined) return { id };
      if (typeof tier === 'string' && tier.length > 0) return { id, tier };
    }
  }
  throw new OutboxerError(
    'RELAY_MISCONFIGURED',
    `pgBossRelay.group returned ${JSON.stringify(value)} for message ${envelope.id}; it must return a non-empty group id, { id, tier } with non-empty strings, or null.`,
    { retryable: true },
  );
}
