/**
 * The `inboxes` option, resolved once at construction like the outboxes: each inbox's table and
 * how long handled ids are kept.
 */
import { parseTableName, sameTable, type QualifiedName } from '../identifiers.js';
import {
  integerOption,
  invalidOption,
  isPlainObject,
  MAX_KEEP_SECONDS,
  rejectUnknownKeys,
} from '../options.js';
import { validateIdentifier } from '../identifiers.js';
import type { Inbox } from './inbox.js';
import { resolveProcess, type InboxProcessOptions, type ResolvedInboxProcess } from './process.js';

/** Options of one inbox. */
export interface InboxOptions<Tx = unknown, Sync extends boolean = boolean> {
  /** Table of handled ids, `name` or `schema.name`. Default `outboxer_inbox` (inboxes may share it). */
  table?: string;
  /**
   * How long a handled id is remembered, in seconds: a duplicate that arrives later is handled
   * again. Default 7 days. Choose more than the longest time a source may redeliver (a broker's
   * retention, a replay, a retry schedule).
   */
  retention?: { keep: number };
  /** Milliseconds between two prunes of expired ids on a relaying node. Default 60000. */
  pruneInterval?: number;
  /**
   * Store, then process in order: `inbox.store(tx, message)` stores messages, and relaying nodes
   * process them with `handler`, each in a transaction of `transaction`, in order per group,
   * through the outbox `inbox:<name>` (every outbox option but `relay` applies to it). See
   * "Store, then process" in docs/inbox.md. Default: none (`handle` only).
   */
  process?: InboxProcessOptions<Tx, Sync>;
}

export interface ResolvedInbox {
  readonly name: string;
  readonly table: QualifiedName;
  readonly keepSeconds: number;
  readonly pruneInterval: number;
  /** The `process` option with its backing outbox; undefined without one. */
  readonly process?: ResolvedInboxProcess | undefined;
}

const INBOX_KEYS = ['table', 'retention', 'pruneInterval', 'process'];
const WEEK = 7 * 86_400;

/**
 * `processed(name)` is the inbox that records what the `process` option of inbox `name`
 * processed, looked up when the first stored message is processed.
 */
export function resolveInboxes(
  raw: unknown,
  schema: string | undefined,
  processed: (name: string) => Inbox<unknown, boolean>,
): ReadonlyMap<string, ResolvedInbox> {
  if (raw === undefined) return new Map();
  if (!isPlainObject(raw)) throw invalidOption('inboxes', 'an object of inboxes by name', raw);
  return new Map(
    Object.entries(raw).map(([name, options]) => [name, resolveInbox(name, options, schema, processed)]),
  );
}

function resolveInbox(
  name: string,
  raw: unknown,
  schema: string | undefined,
  processed: (name: string) => Inbox<unknown, boolean>,
): ResolvedInbox {
  const path = `inboxes.${name}`;
  validateIdentifier(name, `${path} (the inbox name)`, /^[A-Za-z0-9_.-]{1,100}$/);
  if (!isPlainObject(raw)) throw invalidOption(path, 'an object of inbox options', raw);
  rejectUnknownKeys(path, raw, INBOX_KEYS);
  return Object.freeze({
    name,
    table: parseTableName(raw.table ?? 'outboxer_inbox', `${path}.table`, schema),
    keepSeconds: keepSeconds(`${path}.retention`, raw.retention),
    pruneInterval: integerOption(`${path}.pruneInterval`, raw.pruneInterval, 60_000, 1000, 86_400_000),
    process:
      raw.process === undefined
        ? undefined
        : resolveProcess(name, raw.process, schema, () => processed(name)),
  });
}

function keepSeconds(path: string, value: unknown): number {
  if (value === undefined) return WEEK;
  if (isPlainObject(value)) {
    rejectUnknownKeys(path, value, ['keep']);
    const keep = value.keep;
    if (typeof keep === 'number' && keep >= 0 && keep <= MAX_KEEP_SECONDS) return keep;
    throw invalidOption(
      `${path}.keep`,
      `a number of seconds from 0 to ${MAX_KEEP_SECONDS} (100 years)`,
      keep,
    );
  }
  throw invalidOption(path, '{ keep: seconds }', value);
}

/** The distinct tables of the inboxes, for migrate(). */
export function inboxTables(inboxes: ReadonlyMap<string, ResolvedInbox>): QualifiedName[] {
  const tables: QualifiedName[] = [];
  for (const { table } of inboxes.values()) if (!tables.some((t) => sameTable(t, table))) tables.push(table);
  return tables;
}
