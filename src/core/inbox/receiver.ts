/**
 * What every receiver shares, whatever the broker: the options that tie a delivery to an inbox
 * (the outboxer instance, the inbox's name, the consumer's transaction runner, the handler), and
 * the one step that runs `inbox.handle` inside a transaction of the consumer's data layer. Each
 * receiver (src/receivers/<destination>) reads the message's identity off its delivery, calls
 * {@link InboxReceiver.receive}, and acknowledges the broker once that has resolved: after the
 * commit, never before.
 */
import { OutboxerError, showValue } from '../errors.js';
import { invalidOption, isPlainObject, rejectUnknownKeys } from '../options.js';
import type { Logger } from '../logger.js';
import type { Inbox, InboxMessage, InboxOutcome } from './inbox.js';
import type { InboxOrder } from './order.js';

/**
 * Runs `work` in a new transaction of your data layer and commits when it returns, rolls back
 * when it throws: the shape of `knex.transaction`, Kysely's `db.transaction().execute`, Drizzle's
 * and TypeORM's `transaction`, `prisma.$transaction`, postgres.js `sql.begin` and MikroORM's
 * `em.transactional`, so most data layers pass theirs as it is. Synchronous on better-sqlite3 and
 * node:sqlite, whose transactions are.
 *
 * @example
 * transaction: (work) => db.transaction().execute(work)                    // Kysely
 * transaction: (work) => prisma.$transaction(work)                        // Prisma
 * transaction: (work) => db.transaction(() => work(db))()                 // better-sqlite3
 */
export type TransactionRunner<Tx, Sync extends boolean> = Sync extends true
  ? <T>(work: (tx: Tx) => T) => T
  : <T>(work: (tx: Tx) => Promise<T>) => Promise<T>;

/**
 * Handles one received message inside the receiver's transaction: do the message's writes with
 * `tx`. It runs only for a message the inbox has not recorded yet; what it throws rolls the
 * transaction back and leaves the message unacknowledged (the broker delivers it again).
 * `order` says whether a later message of its group was handled before it (see "Order at the
 * consumer" in docs/inbox.md): a handler may skip a stale update. Synchronous on a synchronous
 * adapter.
 */
export type ReceiverHandler<M, Tx, Sync extends boolean> = (
  message: M,
  tx: Tx,
  order: InboxOrder,
) => Sync extends true ? unknown : unknown | Promise<unknown>;

/**
 * The options every receiver takes. `M` is what the handler gets; `Raw` is the client's own
 * message (a Kafka record, an SQS message, a job…), which the `id` function reads. Either a
 * `handler` (handle each message now, in the receiver's transaction) or `store: true` (store it,
 * for the inbox's `process` option to process later): never both, and never neither.
 *
 * `Tx` may be narrower than the instance's transaction type (a `pg.PoolClient` where the adapter
 * accepts any pg client): the handler gets what your runner passes.
 */
export type ReceiverOptions<
  M,
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
  Raw = M,
> = ReceiverCommonOptions<OutboxerTx, Sync, Tx, Raw> &
  (HandlingReceiverOptions<M, Tx, Sync> | StoringReceiverOptions);

/** What every receiver's options hold, whether it handles or stores. */
export interface ReceiverCommonOptions<OutboxerTx, Sync extends boolean, Tx extends OutboxerTx, Raw> {
  /** The instance whose `inboxes` option names {@link ReceiverCommonOptions.inbox}. */
  outboxer: { inbox(name: string): Inbox<OutboxerTx, Sync>; readonly settings: { readonly logger: Logger } };
  /** The inbox that records each message handled. */
  inbox: string;
  /** Opens, commits and rolls back the transaction each message is handled in. */
  transaction: TransactionRunner<Tx, Sync>;
  /**
   * The id of a message that carries no `outboxer-id` (one another producer sent): return a
   * string or a safe integer unique at its source, or undefined to refuse it with
   * {@link MissingMessageIdError}. Default: every such message is refused.
   */
  id?: (message: Raw) => string | number | undefined;
  /**
   * The inbox's source for every message: where its ids are unique. Default: the message's
   * `outboxer-outbox` header (outbox ids are unique per outbox), else the name of where it was
   * received from (the topic, queue, subject or stream).
   */
  source?: string;
}

/** A receiver that handles each new message now, in its transaction, before the broker is acknowledged. */
export interface HandlingReceiverOptions<M, Tx, Sync extends boolean> {
  /** What a new message does. */
  handler: ReceiverHandler<M, Tx, Sync>;
  /** Left out, or false: the receiver handles. */
  store?: false;
}

/**
 * A receiver that stores each new message (`inbox.store`: its payload, headers and type) instead
 * of handling it, and acknowledges once stored; the inbox's `process` option processes it later,
 * per group in the order stored. For handlers too slow to run while the broker waits (SQS visibility, a
 * webhook sender's timeout). Needs an inbox with a `process` option. See "Store, then process"
 * in docs/inbox.md.
 */
export interface StoringReceiverOptions {
  store: true;
  /** None: the inbox's `process.handler` does the work. */
  handler?: never;
}

/**
 * A message as a broker receiver's handler gets it: its identity, what outboxer's relay put in
 * its headers, its body parsed, and the client's own message.
 */
export interface ReceivedMessage<Raw> {
  /** The `outboxer-id` header (the outbox id), or what the `id` option returned. */
  readonly id: string;
  /** Where the id is unique: the `outboxer-outbox` header, else the topic, queue, stream or subject. */
  readonly source: string;
  /** The `outboxer-group-key` header; null without one. */
  readonly groupKey: string | null;
  /** The `outboxer-type` header; null without one. */
  readonly type: string | null;
  /** The message's headers (or attributes) as text, outboxer's included. */
  readonly headers: Readonly<Record<string, string>>;
  /** The body parsed as JSON (the relays send the payload as JSON); undefined when it is not JSON. */
  readonly payload: unknown;
  /** The client's own message, for anything else it carries. */
  readonly raw: Raw;
}

/**
 * What a receiver did with a delivery: the inbox's outcome (the handler's value, with
 * `outOfOrder: true` and `after` for a message that came after a later one of its group; or
 * `duplicate: true` with when it was handled) and the identity it was recorded under.
 */
export type ReceiveOutcome = InboxOutcome<unknown> & { readonly id: string; readonly source: string };

/** What a receiver found on a delivery: the identity the inbox records. */
export interface ReceivedIdentity {
  /** The `outboxer-id` header (or attribute), undefined when there is none. */
  readonly id: string | undefined;
  readonly source: string;
  readonly groupKey: string | null;
}

/**
 * A delivery without an `outboxer-id` (not relayed by outboxer) and no `id` option to name one:
 * the receiver cannot tell a redelivery from a new message, so it handles nothing and
 * acknowledges nothing. Code `INVALID_MESSAGE`.
 *
 * @example
 * catch (error) {
 *   if (error instanceof MissingMessageIdError) await deadLetter(delivery);
 * }
 */
export class MissingMessageIdError extends OutboxerError {
  /** `hint` says what else may have dropped the id (a consumer that did not ask for attributes). */
  constructor(receiver: string, source: string, hint = 'it was not relayed by outboxer') {
    super(
      'INVALID_MESSAGE',
      `${receiver} got a message${source === '' ? '' : ` from "${source}"`} without an outboxer-id: ${hint}. Pass the receiver an "id" option that returns the message's id at its source, or route such messages elsewhere.`,
    );
    this.name = 'MissingMessageIdError';
  }
}

/** The checked options of one receiver, and the step they share. */
export class InboxReceiver<M, Sync extends boolean, Raw = M> {
  readonly logger: Logger;
  readonly inboxName: string;
  /** The receiver's name in messages (`webhookReceiver`…). */
  readonly what: string;
  /** The `source` option, undefined when it was left out. */
  readonly source: string | undefined;
  private readonly inbox: Inbox<unknown, Sync>;
  private readonly transaction: (work: (tx: unknown) => unknown) => unknown;
  private readonly handler: ((message: M, tx: unknown, order: InboxOrder) => unknown) | undefined;
  private readonly id: ((message: Raw) => unknown) | undefined;
  /** With `store: true`, what of a message is stored; undefined when the receiver handles. */
  private readonly stored: ((message: M) => StoredParts) | undefined;

  /**
   * Checks the shared options (`what` names the receiver in messages, e.g. `webhookReceiver`)
   * and rejects keys that are neither shared nor in `ownKeys`. `withId: false` for a receiver
   * whose messages always carry their id (the webhook's is signed): it takes no `id` option.
   */
  constructor(
    what: string,
    raw: unknown,
    ownKeys: readonly string[],
    withId = true,
    storedParts: (message: M) => StoredParts = receivedParts as (message: M) => StoredParts,
  ) {
    if (!isPlainObject(raw)) throw invalidOption(what, 'an options object', raw);
    rejectUnknownKeys(what, raw, [...RECEIVER_KEYS.filter((k) => withId || k !== 'id'), ...ownKeys]);
    const outboxer = raw.outboxer as
      ReceiverCommonOptions<unknown, Sync, unknown, Raw>['outboxer'] | undefined;
    // An Outboxer has both; a look-alike without settings would fail at the first refusal instead.
    if (typeof outboxer?.inbox !== 'function' || typeof outboxer.settings?.logger !== 'object')
      throw invalidOption(`${what}.outboxer`, 'an Outboxer instance', outboxer);
    if (typeof raw.inbox !== 'string')
      throw invalidOption(
        `${what}.inbox`,
        'the name of an inbox in the instance’s inboxes option',
        raw.inbox,
      );
    if (raw.store !== undefined && typeof raw.store !== 'boolean')
      throw invalidOption(`${what}.store`, 'true or false', raw.store);
    const store = raw.store === true;
    if (typeof raw.transaction !== 'function')
      throw invalidOption(`${what}.transaction`, 'a function', raw.transaction);
    if (store ? raw.handler !== undefined : typeof raw.handler !== 'function')
      throw invalidOption(
        `${what}.handler`,
        store ? "left out with store: true (the inbox's process.handler processes)" : 'a function',
        raw.handler,
      );
    if (raw.source !== undefined && typeof raw.source !== 'string')
      throw invalidOption(`${what}.source`, 'a string', raw.source);
    if (raw.id !== undefined && typeof raw.id !== 'function')
      throw invalidOption(`${what}.id`, 'a function (message) => id', raw.id);
    // Looked up now: a misspelt inbox fails at start-up (UNKNOWN_INBOX), not at the first message.
    this.inbox = outboxer.inbox(raw.inbox) as Inbox<unknown, Sync>;
    if (store && this.inbox.outbox === undefined)
      throw invalidOption(
        `${what}.store`,
        `false for inbox "${raw.inbox}", which has no process option (give it inboxes.${raw.inbox}.process to store)`,
        true,
      );
    this.stored = store ? storedParts : undefined;
    this.inboxName = raw.inbox;
    this.what = what;
    this.source = raw.source as string | undefined;
    this.logger = outboxer.settings.logger;
    this.transaction = raw.transaction as InboxReceiver<M, Sync, Raw>['transaction'];
    this.handler = raw.handler as InboxReceiver<M, Sync, Raw>['handler'];
    this.id = raw.id as InboxReceiver<M, Sync, Raw>['id'];
  }

  /**
   * Handles `raw` once: in a transaction of the runner, records its identity in the inbox and runs
   * the handler, with the message `build` makes of the id, unless it was recorded before.
   * Resolves after the commit, which is when the caller may acknowledge it; rejects (nothing
   * committed) when the handler, the inbox or the transaction failed, or the message has no id
   * ({@link MissingMessageIdError}).
   */
  async receive(
    raw: Raw,
    found: ReceivedIdentity,
    build: (id: string) => M,
    hint?: string,
  ): Promise<ReceiveOutcome> {
    const id = found.id ?? this.id?.(raw);
    if (id === undefined) throw new MissingMessageIdError(this.what, found.source, hint);
    if (typeof id !== 'string' && typeof id !== 'number') {
      throw new OutboxerError(
        'INVALID_MESSAGE',
        `The "id" option of ${this.what} must return a string or a safe integer; got ${showValue(id)}.`,
      );
    }
    const text = String(id);
    const message = build(text);
    const identity: InboxMessage = { id, source: found.source, groupKey: found.groupKey };
    // The outboxer-id grows along a group at the producer: the inbox reports a message that comes
    // after a later one of its group. An id of another producer (the `id` option) says nothing of order.
    if (found.id !== undefined && found.groupKey !== null && /^\d{1,19}$/.test(found.id))
      identity.sequence = found.id;
    const stored = this.stored?.(message);
    const outcome = (await this.transaction((tx) =>
      stored === undefined
        ? this.inbox.handle(tx, identity, (order) => this.handler!(message, tx, order) as never)
        : this.inbox.store(tx, { ...identity, ...stored }),
    )) as InboxOutcome<unknown>;
    return { ...outcome, id: text, source: found.source };
  }
}

const RECEIVER_KEYS = ['outboxer', 'inbox', 'transaction', 'handler', 'id', 'source', 'store'];

/** What `store: true` keeps of a delivery: its body, headers and type. */
export interface StoredParts {
  readonly payload: unknown;
  readonly headers: Readonly<Record<string, string>>;
  readonly type: string | null;
}

/** The stored parts of a broker receiver's message ({@link ReceivedMessage}); a body that is not JSON is kept as null. */
function receivedParts(message: ReceivedMessage<unknown>): StoredParts {
  return { payload: message.payload ?? null, headers: message.headers, type: message.type };
}
