/**
 * Store, then process in order: an inbox with a `process` option is backed by an ordinary outbox
 * of the engine, `inbox:<name>`. `store` (store.ts) dedupes a received message in the caller's
 * transaction and publishes it there; the backing outbox's relay, built here, processes each
 * message in a transaction of the consumer's runner, through `handle` on a second inbox,
 * `inbox:<name>` too, keyed by the backing outbox's id: the effect and the "processed" record
 * commit together, so a message delivered again after its commit (a crash before the engine
 * settled it, a lost commit reply) is a duplicate and is skipped. Partitions, leases, backoff,
 * strict and dead-letter modes, the listings, the CLI and telemetry are the engine's, unchanged.
 */
import { PermanentError } from '../errors.js';
import {
  INBOX_OUTBOX_PREFIX,
  invalidOption,
  isPlainObject,
  OUTBOX_KEYS,
  rejectUnknownKeys,
  resolveOutboxOptions,
  type OutboxOptions,
  type ResolvedOutbox,
} from '../options.js';
import { functionRelay, type Envelope, type Relay } from '../relay.js';
import type { Inbox } from './inbox.js';
import type { InboxOrder } from './order.js';
import type { TransactionRunner } from './receiver.js';

/** The stored row's payload: the identity the message was stored under, and the message. */
export interface StoredBody {
  readonly id: string;
  readonly source: string;
  readonly payload: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

/** A stored message as the `process.handler` gets it. */
export interface StoredMessage {
  /** The id it was stored under (its id at the source), as text. */
  readonly id: string;
  /** The source it was stored under; '' when none was given. */
  readonly source: string;
  readonly groupKey: string | null;
  readonly type: string | null;
  /** The headers given to `store`; `{}` without any. */
  readonly headers: Readonly<Record<string, string>>;
  readonly payload: unknown;
  /** Its id in the backing outbox (`inbox:<name>`): what `listDead`, `retryDead` and `discard` take. */
  readonly storedId: number;
  /** Failed attempts to process it so far (0 the first time). */
  readonly attempts: number;
}

/**
 * The `process` option of an inbox: store, then process in order. Every outbox option but `relay`
 * applies to the backing outbox `inbox:<name>` (defaults as for an outbox: one partition,
 * `ordering: 'group'`, strict, `retention: 'delete'`).
 *
 * @example
 * inboxes: {
 *   payments: {
 *     process: {
 *       transaction: (work) => db.transaction().execute(work),   // Kysely
 *       handler: async (message, trx) => { await trx.insertInto('charges').values(…).execute(); },
 *       partitions: 4,
 *       maxAttempts: 10,
 *     },
 *   },
 * }
 */
export interface InboxProcessOptions<Tx = unknown, Sync extends boolean = boolean> extends Omit<
  OutboxOptions,
  'relay'
> {
  /** Opens, commits and rolls back the transaction each stored message is processed in. */
  transaction: TransactionRunner<Tx, Sync>;
  /**
   * Processes one stored message: do its writes with `tx`. What it throws rolls the transaction
   * back and the engine retries the message with backoff (dead past `maxAttempts`); the group's
   * later messages wait behind it. `order` says whether a later message of its group was processed
   * before it (after `retryDead`). Synchronous on a synchronous adapter.
   */
  handler(message: StoredMessage, tx: Tx, order: InboxOrder): unknown;
}

/** The resolved `process` option: the backing outbox and the consumer's two functions. */
export interface ResolvedInboxProcess {
  readonly outbox: ResolvedOutbox;
  readonly transaction: (work: (tx: unknown) => unknown) => unknown;
  readonly handler: (message: StoredMessage, tx: unknown, order: InboxOrder) => unknown;
}

/** What the relay of a backing outbox processes each message with: the "processed" inbox. */
export type ProcessedInbox = () => Inbox<unknown, boolean>;

/** The name of the outbox behind inbox `inbox`, and of the inbox recording what it processed. */
export function processingName(inbox: string): string {
  return `${INBOX_OUTBOX_PREFIX}${inbox}`;
}

/** Checks the `process` option of inbox `name`; `processed` is read at the first delivery. */
export function resolveProcess(
  name: string,
  raw: unknown,
  schema: string | undefined,
  processed: ProcessedInbox,
): ResolvedInboxProcess {
  const path = `inboxes.${name}.process`;
  if (!isPlainObject(raw))
    throw invalidOption(path, 'an object { transaction, handler, …outbox options }', raw);
  // The outbox `inbox:<name>` and its "processed" records live in VARCHAR(100) columns on MySQL.
  if (name.length > 100 - INBOX_OUTBOX_PREFIX.length)
    throw invalidOption(
      `inboxes.${name}`,
      `a name of at most ${100 - INBOX_OUTBOX_PREFIX.length} characters with a process option`,
      name,
    );
  rejectUnknownKeys(path, raw, [...OUTBOX_KEYS.filter((key) => key !== 'relay'), 'transaction', 'handler']);
  const { transaction, handler, ...options } = raw;
  if (typeof transaction !== 'function')
    throw invalidOption(
      `${path}.transaction`,
      'a function (work) => work(tx) in a new transaction',
      transaction,
    );
  if (typeof handler !== 'function')
    throw invalidOption(`${path}.handler`, 'a function (message, tx, order) => …', handler);
  const process = {
    transaction: transaction as ResolvedInboxProcess['transaction'],
    handler: handler as ResolvedInboxProcess['handler'],
  };
  const relay = processingRelay(processingName(name), process, processed);
  const outbox = resolveOutboxOptions(
    processingName(name),
    { ...options, relay },
    { relaying: true, schema },
    path,
  );
  return Object.freeze({ ...process, outbox });
}

/**
 * The relay of a backing outbox: each message, one at a time in id order (a group's later
 * messages are skipped after one failed, as every relay does), in a transaction of the runner,
 * handled once by the "processed" inbox under its backing id.
 */
function processingRelay(
  name: string,
  process: Pick<ResolvedInboxProcess, 'transaction' | 'handler'>,
  processed: ProcessedInbox,
): Relay {
  return functionRelay(
    async (envelope) => {
      const message = storedMessageOf(envelope);
      const key = {
        id: envelope.id,
        // Backing ids are unique per table: the source keeps them apart if `table` ever changes.
        source: envelope.outbox,
        groupKey: envelope.groupKey,
        // Reports a message processed after a later one of its group (a dead one retried).
        sequence: envelope.groupKey === null ? undefined : envelope.id,
      };
      await process.transaction((tx) =>
        processed().handle(tx, key, (order) => process.handler(message, tx, order) as never),
      );
    },
    { name },
  );
}

/** The handler's view of a backing outbox's message. */
function storedMessageOf(envelope: Envelope): StoredMessage {
  const body = envelope.payload as Partial<StoredBody> | null;
  if (typeof body !== 'object' || body === null || typeof body.id !== 'string') {
    // Written by something else than `store` (a publish into inbox:<name> by hand): dead at once.
    throw new PermanentError(
      `Message ${envelope.id} of outbox "${envelope.outbox}" is not a stored message ({ id, source, payload }): only inbox.store() writes there.`,
    );
  }
  return {
    id: body.id,
    source: typeof body.source === 'string' ? body.source : '',
    groupKey: envelope.groupKey,
    type: envelope.type,
    headers: body.headers ?? {},
    payload: body.payload,
    storedId: envelope.id,
    attempts: envelope.attempts,
  };
}
