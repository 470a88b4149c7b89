import { OutboxerError, showValue } from './errors.js';
import { parseTableName, validateIdentifier, type QualifiedName } from './identifiers.js';
import { consoleLogger, silentLogger, type Logger } from './logger.js';
import type { Relay } from './relay.js';

import type { Ordering } from './relay.js';

export type { Ordering } from './relay.js';

/** What happens to a delivered message: removed at once, or kept for `keep` seconds then pruned. */
export type Retention = 'delete' | { keep: number };

/** Options of one outbox. Every field but `relay` has a default. */
export interface OutboxOptions {
  /** Where messages go. Not needed on a publish-only instance (`relay: false`). */
  relay?: Relay;
  /** Default `'group'`: order per group key. `'total'`: one global order. `'none'`: no order. */
  ordering?: Ordering;
  /** Number of partitions, each delivered by one worker in the whole cluster. Default 1; `'total'` needs 1. */
  partitions?: number;
  /** Messages handed to the relay at once. Default 100. */
  batchSize?: number;
  /** Milliseconds between polls of an idle partition. Default 1000. */
  pollInterval?: number;
  /**
   * Milliseconds a relay may take for one batch. The partition's lease is kept alive meanwhile;
   * past it the batch is abandoned (the relay's signal aborts) and the lease lapses, so a hung
   * relay gives its partition up after `deliveryTimeout + leaseTimeout`. Default 300000 (5 min).
   */
  deliveryTimeout?: number;
  /** Failures before a message goes dead. Default `Infinity` (strict: retried forever). */
  maxAttempts?: number;
  /**
   * In strict mode, the longest a message may keep failing (milliseconds since its first failure)
   * before it goes dead anyway, so an outage does not burn a retry budget (`maxAttempts` counts
   * failures, this counts time) and a poison message does not block its group forever.
   * Default `Infinity`.
   */
  maxRetryDuration?: number;
  /**
   * What a dead message does to its group. `'continue'` (default): the group moves on, with a gap
   * in its order. `'park'`: the group stops behind it; its later messages wait (held) until
   * `retryDead()` redelivers the dead message first, in order, or `discard()` removes it.
   */
  onDead?: 'continue' | 'park';
  /** Exponential backoff between attempts in milliseconds, with jitter. Default `{ min: 1000, max: 60000 }`. */
  backoff?: { min?: number; max?: number };
  /** Default `'delete'`. `{ keep: seconds }` marks delivered rows and prunes them later. */
  retention?: Retention;
  /** Milliseconds between prune runs when `retention` keeps rows. Default 60000. */
  pruneInterval?: number;
  /**
   * Postgres: milliseconds between recounts, by the node holding partition 0, of the figures
   * `counts()` reads against the rows themselves. `counts()` sums tallies that every change by
   * outboxer writes with it; a recount corrects what changed the table otherwise (SQL run by hand,
   * nodes on a version without tallies during an upgrade). It reads every row of the outbox.
   * SQLite keeps its tallies with triggers, which tally SQL run by hand too: it never recounts.
   * Default 600000 (10 min), counted from when the outbox's first relay started.
   */
  recountInterval?: number;
  /** Table of this outbox, `name` or `schema.name`. Default `outboxer_messages`. */
  table?: string;
  /**
   * Postgres: wake relays with NOTIFY at commit. Concurrent publishers of a partition send one
   * notification between them (docs/deploying.md, "NOTIFY"). While its listener is connected, an
   * idle worker then sleeps until a notification instead of polling every `pollInterval` (the
   * heartbeat finds, every `leaseTimeout / 3`, a message no notification announced), and
   * partitions handed back are taken by the other relays at once. Refused on MySQL and SQLite,
   * which have no notifications. Default false: then a relaying instance still wakes its own
   * workers after it publishes (in-process), and other instances' messages wait for the next poll.
   */
  notify?: boolean;
  /** Postgres: serialise publishers of one group key with an advisory lock. Default false. */
  serializeWrites?: boolean;
  /** Largest encoded payload accepted by `publish`, in bytes. Default 262144 (256 KiB). */
  maxPayloadBytes?: number;
  /**
   * Accept a configuration (partitions, ordering, serializeWrites) that differs from the one
   * recorded in the database, and record it. Default false: a relaying node that disagrees refuses
   * to start. `true` still refuses to change `partitions` while messages are pending; `'force'`
   * accepts even that (their groups may be reordered, rows in dropped partitions are orphaned).
   */
  reconfigure?: boolean | 'force';
}

export interface ResolvedOutbox {
  readonly name: string;
  readonly relay: Relay | undefined;
  readonly ordering: Ordering;
  readonly partitions: number;
  readonly batchSize: number;
  readonly pollInterval: number;
  readonly deliveryTimeout: number;
  readonly maxAttempts: number;
  readonly maxRetryDuration: number;
  readonly onDead: 'continue' | 'park';
  readonly backoff: { readonly min: number; readonly max: number };
  readonly retention: 'delete' | { readonly keep: number };
  readonly pruneInterval: number;
  readonly recountInterval: number;
  readonly table: QualifiedName;
  readonly notify: boolean;
  readonly serializeWrites: boolean;
  readonly maxPayloadBytes: number;
  readonly reconfigure: boolean | 'force';
}

export interface InstanceSettings {
  readonly name: string;
  /** The stable identity given, or undefined: a fresh `name:uuid` for each instance. */
  readonly nodeId: string | undefined;
  readonly relay: boolean;
  readonly testing: 'manual' | undefined;
  readonly schema: string | undefined;
  readonly leaseTimeout: number;
  readonly shutdownTimeout: number;
  readonly maxErrorLength: number;
  /** The logger in use: the one given, a silent one for `false`, or the default console logger. */
  readonly logger: Logger;
}

export const OUTBOX_KEYS = [
  'relay',
  'ordering',
  'partitions',
  'batchSize',
  'pollInterval',
  'deliveryTimeout',
  'maxAttempts',
  'maxRetryDuration',
  'onDead',
  'backoff',
  'retention',
  'pruneInterval',
  'recountInterval',
  'table',
  'notify',
  'serializeWrites',
  'maxPayloadBytes',
  'reconfigure',
] as const;

export const INSTANCE_KEYS = [
  'database',
  'outboxes',
  'inboxes',
  'relay',
  'testing',
  'name',
  'nodeId',
  'schema',
  'leaseTimeout',
  'shutdownTimeout',
  'maxErrorLength',
  'logger',
  'publishHeaders',
] as const;

export function invalidOption(path: string, accepted: string, got: unknown): OutboxerError {
  return new OutboxerError('INVALID_OPTIONS', `Option "${path}" must be ${accepted}; got ${showValue(got)}.`);
}

export function rejectUnknownKeys(path: string, value: object, known: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw new OutboxerError(
        'INVALID_OPTIONS',
        `Unknown option "${path}${path ? '.' : ''}${key}". Known options: ${known.join(', ')}.`,
      );
    }
  }
}

export function integerOption(
  path: string,
  value: unknown,
  fallback: number,
  min: number,
  max: number,
): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw invalidOption(path, `an integer from ${min} to ${max}`, value);
  }
  return value;
}

export function booleanOption(path: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw invalidOption(path, 'true or false', value);
  return value;
}

function oneOf<T extends string>(path: string, value: unknown, accepted: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !accepted.includes(value as T)) {
    throw invalidOption(path, `one of ${accepted.map((a) => `'${a}'`).join(', ')}`, value);
  }
  return value as T;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const MAX_MS = 2 ** 31 - 1; // the largest delay setTimeout honours
/** Longest retention: the prune's cutoff, now minus this, must stay a date both databases can hold. */
export const MAX_KEEP_SECONDS = 100 * 365 * 86_400;
/** Largest payload: one value has to fit a driver's parameter and a JSON string with room to spare. */
export const MAX_PAYLOAD_BYTES = 64 * 1024 * 1024;

/**
 * The name of the outbox behind an inbox's `process` option: `inbox:<inbox name>`. A configured
 * outbox cannot take it on a relaying instance (its names have no `:`), so nothing but the inbox
 * relays it; operator tools (`relay: false`: the CLI, a dashboard) may name it to read it.
 */
export const INBOX_OUTBOX_PREFIX = 'inbox:';

export function resolveOutbox(
  name: string,
  raw: unknown,
  instance: { relaying: boolean; schema: string | undefined },
): ResolvedOutbox {
  const path = `outboxes.${name}`;
  const inboxOutbox = !instance.relaying && typeof name === 'string' && name.startsWith(INBOX_OUTBOX_PREFIX);
  validateIdentifier(
    inboxOutbox ? name.slice(INBOX_OUTBOX_PREFIX.length) : name,
    `${path} (the outbox name)`,
    inboxOutbox ? /^[A-Za-z0-9_.-]{1,94}$/ : /^[A-Za-z0-9_.-]{1,100}$/,
  );
  return resolveOutboxOptions(name, raw, instance, path);
}

/**
 * The options of an outbox whose name is already checked, read under `path` (`outboxes.orders`,
 * or `inboxes.payments.process` for the outbox behind an inbox).
 */
export function resolveOutboxOptions(
  name: string,
  raw: unknown,
  instance: { relaying: boolean; schema: string | undefined },
  path: string,
): ResolvedOutbox {
  if (!isPlainObject(raw)) throw invalidOption(path, 'an object of outbox options', raw);
  rejectUnknownKeys(path, raw, OUTBOX_KEYS);

  const ordering = oneOf(`${path}.ordering`, raw.ordering, ['group', 'total', 'none'], 'group');
  const partitions = integerOption(`${path}.partitions`, raw.partitions, 1, 1, 1024);
  if (ordering === 'total' && partitions !== 1) {
    throw invalidOption(
      `${path}.partitions`,
      "1 when ordering is 'total' (one worker keeps one order)",
      partitions,
    );
  }
  const relay = raw.relay as Relay | undefined;
  if (
    relay !== undefined &&
    (typeof relay !== 'object' || relay === null || typeof relay.deliver !== 'function')
  ) {
    throw invalidOption(`${path}.relay`, 'a relay (an object with a deliver(batch, context) method)', relay);
  }
  if (relay === undefined && instance.relaying) {
    throw invalidOption(
      `${path}.relay`,
      'a relay such as functionRelay(...) on an instance that relays (or set relay: false on the instance for a publish-only node)',
      relay,
    );
  }

  return Object.freeze({
    name,
    relay,
    ordering,
    partitions,
    batchSize: integerOption(`${path}.batchSize`, raw.batchSize, 100, 1, 10_000),
    pollInterval: integerOption(`${path}.pollInterval`, raw.pollInterval, 1000, 1, MAX_MS),
    deliveryTimeout: integerOption(`${path}.deliveryTimeout`, raw.deliveryTimeout, 300_000, 1, MAX_MS),
    maxAttempts: resolveMaxAttempts(`${path}.maxAttempts`, raw.maxAttempts),
    maxRetryDuration: resolveMaxRetryDuration(`${path}.maxRetryDuration`, raw.maxRetryDuration),
    onDead: resolveOnDead(`${path}.onDead`, raw.onDead, ordering),
    backoff: resolveBackoff(`${path}.backoff`, raw.backoff),
    retention: resolveRetention(`${path}.retention`, raw.retention),
    pruneInterval: integerOption(`${path}.pruneInterval`, raw.pruneInterval, 60_000, 1, MAX_MS),
    recountInterval: integerOption(`${path}.recountInterval`, raw.recountInterval, 600_000, 1000, MAX_MS),
    table: parseTableName(raw.table ?? 'outboxer_messages', `${path}.table`, instance.schema),
    notify: booleanOption(`${path}.notify`, raw.notify, false),
    serializeWrites: booleanOption(`${path}.serializeWrites`, raw.serializeWrites, false),
    maxPayloadBytes: integerOption(
      `${path}.maxPayloadBytes`,
      raw.maxPayloadBytes,
      262_144,
      1,
      MAX_PAYLOAD_BYTES,
    ),
    reconfigure: resolveReconfigure(`${path}.reconfigure`, raw.reconfigure),
  });
}

function resolveReconfigure(path: string, value: unknown): boolean | 'force' {
  if (value === undefined) return false;
  if (value === true || value === false || value === 'force') return value;
  throw invalidOption(path, "true, false or 'force'", value);
}

function resolveMaxRetryDuration(path: string, value: unknown): number {
  if (value === undefined || value === Infinity) return Infinity;
  return integerOption(path, value, Infinity, 0, Number.MAX_SAFE_INTEGER);
}

function resolveOnDead(path: string, value: unknown, ordering: Ordering): 'continue' | 'park' {
  const onDead = oneOf(path, value, ['continue', 'park'], 'continue');
  if (onDead === 'park' && ordering === 'none') {
    throw invalidOption(path, "'continue' when ordering is 'none' (there is no group to park)", value);
  }
  return onDead;
}

function resolveMaxAttempts(path: string, value: unknown): number {
  if (value === undefined || value === Infinity) return Infinity;
  return integerOption(path, value, Infinity, 1, Number.MAX_SAFE_INTEGER);
}

function resolveBackoff(path: string, value: unknown): { min: number; max: number } {
  if (value === undefined) return Object.freeze({ min: 1000, max: 60_000 });
  if (!isPlainObject(value)) throw invalidOption(path, 'an object { min, max } in milliseconds', value);
  rejectUnknownKeys(path, value, ['min', 'max']);
  const min = integerOption(`${path}.min`, value.min, 1000, 0, MAX_MS);
  const max = integerOption(`${path}.max`, value.max, Math.max(60_000, min), 0, MAX_MS);
  if (max < min) throw invalidOption(`${path}.max`, `at least backoff.min (${min})`, max);
  return Object.freeze({ min, max });
}

/**
 * Left out: warnings and errors on the console, rate-limited (`consoleLogger`). `false`: nothing.
 * A logger: every call, unfiltered.
 */
function resolveLogger(value: unknown): Logger {
  if (value === undefined) return consoleLogger();
  if (value === false) return silentLogger;
  if (
    typeof value === 'object' &&
    value !== null &&
    (['debug', 'info', 'warn', 'error'] as const).every(
      (m) => typeof (value as Record<string, unknown>)[m] === 'function',
    )
  ) {
    return value as Logger;
  }
  throw invalidOption(
    'logger',
    'an object with debug, info, warn and error methods (console, pino and winston work), or false to log nothing',
    value,
  );
}

function resolveRetention(path: string, value: unknown): 'delete' | { keep: number } {
  if (value === undefined || value === 'delete') return 'delete';
  if (isPlainObject(value)) {
    rejectUnknownKeys(path, value, ['keep']);
    const keep = value.keep;
    if (typeof keep === 'number' && keep >= 0 && keep <= MAX_KEEP_SECONDS) return Object.freeze({ keep });
    throw invalidOption(
      `${path}.keep`,
      `a number of seconds from 0 to ${MAX_KEEP_SECONDS} (100 years)`,
      keep,
    );
  }
  throw invalidOption(path, "'delete' or { keep: seconds }", value);
}

/** A pod or host name: what a platform that runs one process per identity names it by. */
function nodeIdOption(value: unknown): string {
  if (typeof value !== 'string' || !/^[A-Za-z0-9_.:@-]{1,128}$/.test(value)) {
    throw invalidOption('nodeId', '1 to 128 letters, digits and _ . : @ - (a pod or host name)', value);
  }
  return value;
}

export function resolveInstance(raw: Record<string, unknown>): InstanceSettings {
  const relay = booleanOption('relay', raw.relay, true);
  const testing = raw.testing === undefined ? undefined : oneOf('testing', raw.testing, ['manual'], 'manual');
  const name = raw.name === undefined ? 'outboxer' : raw.name;
  validateIdentifier(name, 'name', /^[A-Za-z0-9_.-]{1,63}$/);
  const nodeId = raw.nodeId === undefined ? undefined : nodeIdOption(raw.nodeId);
  const schema = raw.schema === undefined ? undefined : validateIdentifier(raw.schema, 'schema');
  const logger = resolveLogger(raw.logger);
  return Object.freeze({
    name: name as string,
    nodeId,
    relay,
    testing,
    schema,
    leaseTimeout: integerOption('leaseTimeout', raw.leaseTimeout, 30_000, 100, MAX_MS),
    shutdownTimeout: integerOption('shutdownTimeout', raw.shutdownTimeout, 30_000, 0, MAX_MS),
    maxErrorLength: integerOption('maxErrorLength', raw.maxErrorLength, 2000, 100, 1_000_000),
    logger,
  });
}
