/**
 * `outboxer.inbox(name)`: each received message handled once. `handle` records the message's id
 * in the inbox table inside the caller's transaction, under a savepoint, and runs the handler
 * there only when the id was not recorded yet: the effect and the record commit together or not
 * at all, and a handler that throws leaves neither behind, even when the caller goes on with its
 * transaction. Synchronous on better-sqlite3 and node:sqlite (their transactions are synchronous).
 */
import { run, type DatabaseAdapter, type MaybePromise } from '../database.js';
import { explainMissingSchema, OutboxerError } from '../errors.js';
import { queriesOf, readResults, type Row, type SqlQuery, type Statements } from '../sql.js';
import { groupKeyText, idText, invalid, sourceText } from './identity.js';
import { channels, emit } from '../telemetry.js';
import type { InboxGroupPosition, InboxRecord } from './dialect.js';
import { IN_ORDER, orderOf, sequenceText, type InboxOrder } from './order.js';
import type { ResolvedInbox } from './options.js';
import { storedInput, type StoreMessage, type StoreOutcome } from './store.js';
import type { PublishInput } from '../api.js';

/** A received message's identity. */
export interface InboxMessage {
  /** Its id at the source (the `outboxer-id` header of an outboxer producer, a broker's message id…). */
  id: string | number;
  /** Where it came from, when ids are unique only per source (a topic, a queue, an outbox). Default ''. */
  source?: string | undefined;
  /** Its group (the `outboxer-group-key` header), kept with the record. */
  groupKey?: string | null | undefined;
  /**
   * Its position in its group at the producer (the `outboxer-id` header of an outboxer producer):
   * a non-negative integer as a safe integer, a bigint or decimal text up to 2^63-1. With a
   * `groupKey`, the inbox keeps each group's highest sequence handled and reports a message that
   * comes after a higher one (`outOfOrder: true`); it still handles it. Without a `groupKey` the
   * message is unordered and nothing is checked. See "Order at the consumer" in docs/inbox.md.
   * `undefined` counts as absent, so a header that may be missing passes as it is.
   */
  sequence?: number | bigint | string | undefined;
}

/**
 * What `handle` did: ran the handler (its value; `outOfOrder: true` and the highest sequence of
 * the group handled before, `after`, for a message that arrived late), or found the message
 * already handled. `outcome.outOfOrder` reads on every variant: `if (outcome.outOfOrder) …`.
 */
export type InboxOutcome<T> =
  | { duplicate: false; value: T; outOfOrder?: undefined }
  | { duplicate: false; value: T; outOfOrder: true; after: string }
  | { duplicate: true; handledAt: Date; outOfOrder?: undefined };

/**
 * The handler: it runs inside the transaction passed to `handle` (use that same transaction for its
 * writes), synchronously on a synchronous adapter (better-sqlite3, node:sqlite), sync or async elsewhere. It
 * is not given the transaction (a callback typed with the transaction's type would make
 * `Outboxer<YourClient>` reject an instance built for a structurally wider type), only the
 * message's {@link InboxOrder}: a handler may skip a stale update that arrived late.
 */
export type InboxHandler<Sync extends boolean, T> = (
  order: InboxOrder,
) => Sync extends true ? T : T | Promise<T>;

/** Savepoint names are unique per process, so handles can nest (a handler that handles another message). */
let savepoints = 0;

/** Where an inbox with a `process` option stores messages: its backing outbox, and publish. */
export interface InboxStorage<Tx, Sync extends boolean> {
  readonly outbox: string;
  publish(tx: Tx, input: PublishInput): MaybePromise<number, Sync>;
}

export class Inbox<Tx, Sync extends boolean> {
  constructor(
    private readonly adapter: DatabaseAdapter<Tx, Sync>,
    private readonly inbox: ResolvedInbox,
    private readonly instance: string,
    private readonly storage?: InboxStorage<Tx, Sync>,
  ) {}

  /**
   * The outbox that holds this inbox's stored messages (`inbox:<name>`), for `counts`,
   * `listPending`, `listDead`, `retryDead`, `discard` and the CLI; undefined without a `process`
   * option.
   */
  get outbox(): string | undefined {
    return this.storage?.outbox;
  }

  /**
   * Store, then process: records the message's identity as `handle` does and, when it is new,
   * stores the message in the same transaction, for the `process` option's handler to process
   * later, in order per group. Returns `{ duplicate: false, value: <stored id> }` or, for a message
   * stored before, `{ duplicate: true, handledAt }` with nothing written. Commit, then acknowledge
   * the broker. Throws `INVALID_STATE` for an inbox without a `process` option; a bad message
   * (`INVALID_MESSAGE`, `PAYLOAD_TOO_LARGE`…) writes nothing.
   */
  store(tx: Tx, message: StoreMessage): MaybePromise<StoreOutcome, Sync> {
    const store = () => {
      const storage = this.storage;
      if (storage === undefined) {
        throw new OutboxerError(
          'INVALID_STATE',
          `Inbox "${this.inbox.name}" has no process option: give it inboxes.${this.inbox.name}.process = { transaction, handler } to store messages, or handle them with handle().`,
        );
      }
      const input = storedInput(this.inbox.name, storage.outbox, message);
      return this.handle(tx, message, () => storage.publish(tx, input) as never);
    };
    // Refusals are thrown where the outcome is returned: synchronously, or as a rejected promise.
    if (this.adapter.sync) return store();
    return (async () => store())() as unknown as MaybePromise<StoreOutcome, Sync>;
  }

  /**
   * Runs `handler` inside `tx` unless this message was handled before, recording it as handled in
   * the same transaction. Returns `{ duplicate: false, value }` or, for a message already handled,
   * `{ duplicate: true, handledAt }` without calling the handler. What the handler throws is thrown
   * unchanged, after its writes and the record were rolled back to the savepoint.
   */
  handle<T>(
    tx: Tx,
    message: InboxMessage,
    handler: InboxHandler<Sync, T>,
  ): MaybePromise<InboxOutcome<T>, Sync> {
    const execute = (query: SqlQuery) => this.adapter.executeInTransaction(tx, query);
    if (this.adapter.sync) {
      const steps = this.steps<T>(this.check(message, handler), handler);
      return driveSync(steps, execute as (query: SqlQuery) => Row[], this.inbox.name) as MaybePromise<
        InboxOutcome<T>,
        Sync
      >;
    }
    return (async () =>
      driveAsync(
        this.steps<T>(this.check(message, handler), handler),
        execute as (query: SqlQuery) => Promise<Row[]>,
      ))() as MaybePromise<InboxOutcome<T>, Sync>;
  }

  /**
   * Deletes the ids handled longer than the retention ago, and the groups' highest sequences not
   * moved for as long (with a `process` option, the stored ids and the processed ones); how many
   * ids. Relaying nodes call it on a timer.
   */
  async prune(now = Date.now()): Promise<number> {
    const { inbox } = this.adapter.dialect;
    const before = now - this.inbox.keepSeconds * 1000;
    let pruned = 0;
    let groups = 0;
    // With a process option, what was processed is recorded under inbox:<name>: kept as long.
    for (const name of this.storage === undefined
      ? [this.inbox.name]
      : [this.inbox.name, this.storage.outbox]) {
      pruned += await this.pruneAll((limit) => inbox.pruneHandled(this.inbox.table, name, before, limit));
      groups += await this.pruneAll((limit) => inbox.pruneGroups(this.inbox.table, name, before, limit));
    }
    emit(channels.inboxPrune, () => ({ instance: this.instance, inbox: this.inbox.name, pruned, groups }));
    return pruned;
  }

  /** Runs a bounded delete until one deletes fewer than its bound: short transactions, few locks. */
  private async pruneAll(prune: (limit: number) => Statements<number>): Promise<number> {
    let total = 0;
    for (;;) {
      const pruned = await run(this.adapter, prune(10_000));
      total += pruned;
      if (pruned < 10_000) return total;
    }
  }

  /**
   * The steps of one `handle`, written once for both kinds of adapter: each `yield` hands a
   * statement (or the handler) to {@link driveSync} or {@link driveAsync}, which run it in the
   * caller's transaction and send back its rows (or value), or throw its error in here.
   */
  private *steps<T>(
    { record, position }: { record: InboxRecord; position: InboxGroupPosition | undefined },
    handler: (order: InboxOrder) => unknown,
  ): Generator<Step, InboxOutcome<T>, unknown> {
    const { dialect } = this.adapter;
    const { table } = this.inbox;
    const savepoint = `outboxer_inbox_${++savepoints}`;
    yield { query: dialect.inbox.savepoint(savepoint) };
    let recorded: boolean;
    let order = IN_ORDER;
    try {
      if (position !== undefined && dialect.inbox.recordAndAdvance !== undefined) {
        const result = yield* runWork(dialect.inbox.recordAndAdvance(table, record, position, Date.now()));
        recorded = result.recorded;
        if (result.highest !== undefined) order = orderOf(position.sequence, result.highest);
      } else {
        recorded = yield* runWork(dialect.inbox.recordHandled(table, record, Date.now()));
        // Only a new message moves its group: a duplicate's sequence was counted when it was handled.
        if (recorded && position !== undefined) {
          order = orderOf(
            position.sequence,
            yield* runWork(dialect.inbox.advanceGroup(table, position, Date.now())),
          );
        }
      }
    } catch (error) {
      yield* this.undo(savepoint);
      throw explainMissingSchema(dialect, table, error);
    }
    if (!recorded) {
      yield { query: dialect.inbox.releaseSavepoint(savepoint) };
      const statement = dialect.inbox.handledAt(table, record);
      return this.duplicate(record, statement.read((yield { query: statement }) as Row[]));
    }
    let value: T;
    try {
      value = (yield { call: () => handler(order) }) as T;
    } catch (error) {
      yield* this.undo(savepoint);
      throw error;
    }
    yield { query: dialect.inbox.releaseSavepoint(savepoint) };
    return this.handled(record, position, order, value);
  }

  /** Rolls back to the savepoint and releases it; a failure there leaves the caller's error to be thrown. */
  private *undo(savepoint: string): Generator<Step, void, unknown> {
    const { inbox } = this.adapter.dialect;
    try {
      yield { query: inbox.rollbackToSavepoint(savepoint) };
      yield { query: inbox.releaseSavepoint(savepoint) };
    } catch {
      // The transaction is unusable anyway (a lost connection): the caller's error says more.
    }
  }

  private handled<T>(
    record: InboxRecord,
    position: InboxGroupPosition | undefined,
    order: InboxOrder,
    value: T,
  ): InboxOutcome<T> {
    emit(channels.inboxHandled, () => ({
      instance: this.instance,
      inbox: record.inbox,
      source: record.source,
      id: record.messageId,
    }));
    if (!order.outOfOrder) return { duplicate: false, value };
    emit(channels.inboxOutOfOrder, () => ({
      instance: this.instance,
      inbox: record.inbox,
      source: record.source,
      id: record.messageId,
      groupKey: record.groupKey,
      sequence: position?.sequence,
      after: order.after,
    }));
    return { duplicate: false, value, outOfOrder: true, after: order.after };
  }

  private duplicate(record: InboxRecord, handledAt: number | undefined): InboxOutcome<never> {
    emit(channels.inboxDuplicate, () => ({
      instance: this.instance,
      inbox: record.inbox,
      source: record.source,
      id: record.messageId,
    }));
    // A record pruned between the two statements: it was handled, when is no longer known.
    return { duplicate: true, handledAt: new Date(handledAt ?? Number.NaN) };
  }

  /**
   * The message's record and its group position (with a sequence and a group key), checked before
   * any SQL runs: bad input writes nothing.
   */
  private check(
    message: InboxMessage,
    handler: unknown,
  ): { record: InboxRecord; position: InboxGroupPosition | undefined } {
    const name = this.inbox.name;
    if (typeof message !== 'object' || message === null)
      throw invalid(name, `the message must be an object such as { id, source }; got ${typeof message}.`);
    if (typeof handler !== 'function') throw invalid(name, 'the handler must be a function () => …');
    const record = {
      inbox: name,
      messageId: idText(name, message.id),
      source: sourceText(name, message.source),
      groupKey: groupKeyText(name, message.groupKey),
    };
    const sequence = sequenceText(message.sequence);
    if (typeof sequence === 'object') throw invalid(name, sequence.problem);
    const { inbox, source, groupKey } = record;
    const position =
      sequence === undefined || groupKey === null ? undefined : { inbox, source, groupKey, sequence };
    return { record, position };
  }
}

/** What a step of `handle` asks its driver to do: run a statement, or call the handler. */
type Step = { readonly query: SqlQuery } | { readonly call: () => unknown };

/** Runs a statement, or a batch (MySQL) statement by statement in order, in the caller's transaction. */
function* runWork<R>(work: Statements<R>): Generator<Step, R, unknown> {
  const results: Row[][] = [];
  for (const query of queriesOf(work)) results.push((yield { query }) as Row[]);
  return readResults(work, results);
}

/** Runs the steps on a synchronous adapter; a handler that returns a promise is refused. */
function driveSync<R>(
  steps: Generator<Step, R, unknown>,
  execute: (query: SqlQuery) => Row[],
  inbox: string,
): R {
  let next = (): IteratorResult<Step, R> => steps.next();
  for (;;) {
    const step = next();
    if (step.done) return step.value;
    try {
      const result = 'query' in step.value ? execute(step.value.query) : step.value.call();
      if (isThenable(result)) {
        throw new OutboxerError(
          'INVALID_STATE',
          `The handler of inbox "${inbox}" returned a promise, but this database's transactions are synchronous (better-sqlite3, node:sqlite): handle the message synchronously inside the transaction.`,
        );
      }
      next = () => steps.next(result);
    } catch (error) {
      next = () => steps.throw(error);
    }
  }
}

/** Runs the steps on an asynchronous adapter, one at a time. */
async function driveAsync<R>(
  steps: Generator<Step, R, unknown>,
  execute: (query: SqlQuery) => Promise<Row[]>,
): Promise<R> {
  let next = (): IteratorResult<Step, R> => steps.next();
  for (;;) {
    const step = next();
    if (step.done) return step.value;
    try {
      const result = await ('query' in step.value ? execute(step.value.query) : step.value.call());
      next = () => steps.next(result);
    } catch (error) {
      next = () => steps.throw(error);
    }
  }
}

function isThenable(value: unknown): boolean {
  return (
    typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function'
  );
}
