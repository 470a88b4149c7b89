/**
 * `publish` and `publishMany`: check and encode each message, then one INSERT per table inside
 * the caller's transaction. Synchronous on better-sqlite3 (its transactions are synchronous
 * functions), a promise on every other adapter; {@link Flow} types that split once.
 */
import type { PublishInput } from './api.js';
import type { InsertRow } from './dialect.js';
import { encodeMessage } from './encoding.js';
import { describeError, explainMissingSchema, isOutboxerError, OutboxerError } from './errors.js';
import { sameTable, type QualifiedName } from './identifiers.js';
import type { Instance } from './instance.js';
import { checkBatchBytes, checkBatchLength } from './limits.js';
import { NOTIFY_CHANNEL, notifyPayload } from './notifications.js';
import { invalidOption, type ResolvedOutbox } from './options.js';
import type { MaybePromise } from './database.js';
import { queriesOf, readResults } from './sql.js';
import { channels, emit } from './telemetry.js';

/**
 * The same steps run synchronously or as a promise chain, depending on the adapter: the one place
 * that turns a value into a `MaybePromise` and back.
 */
class Flow<Sync extends boolean> {
  constructor(private readonly sync: Sync) {}

  /** Runs `fn`; on an asynchronous adapter, whatever it throws becomes a rejected promise. */
  attempt<T>(fn: () => MaybePromise<T, Sync>): MaybePromise<T, Sync> {
    if (this.sync) return fn();
    try {
      return fn();
    } catch (error) {
      return Promise.reject(error) as MaybePromise<T, Sync>;
    }
  }

  of<T>(value: T): MaybePromise<T, Sync> {
    return (this.sync ? value : Promise.resolve(value)) as MaybePromise<T, Sync>;
  }

  map<T, U>(value: MaybePromise<T, Sync>, fn: (value: T) => U): MaybePromise<U, Sync> {
    return (this.sync ? fn(value as T) : (value as Promise<T>).then(fn)) as MaybePromise<U, Sync>;
  }

  /** Runs the steps one after another, never two at once on the caller's transaction. */
  sequence<T>(steps: ReadonlyArray<() => MaybePromise<T, Sync>>): MaybePromise<T[], Sync> {
    if (this.sync) return steps.map((step) => step() as T) as MaybePromise<T[], Sync>;
    return (async () => {
      const results: T[] = [];
      for (const step of steps) results.push(await (step() as Promise<T>));
      return results;
    })() as MaybePromise<T[], Sync>;
  }

  /** `value`, with an error it throws or rejects with replaced by `explain(error)`. */
  explained<T>(
    value: () => MaybePromise<T, Sync>,
    explain: (error: unknown) => unknown,
  ): MaybePromise<T, Sync> {
    if (this.sync) {
      try {
        return value();
      } catch (error) {
        throw explain(error);
      }
    }
    return (value() as Promise<T>).catch((error: unknown) => {
      throw explain(error);
    }) as MaybePromise<T, Sync>;
  }
}

/** The rows of one table's INSERT, with where each stands in the caller's list. */
interface EncodedGroup {
  table: QualifiedName;
  rows: InsertRow[];
  positions: number[];
  /** The partitions written, by `outbox:partition` (for `notify`). */
  partitions: Map<string, { outbox: string; partition: number }>;
  serialize: boolean;
  notify: boolean;
}

export class Publisher<Tx, Sync extends boolean> {
  private readonly flow: Flow<Sync>;

  constructor(
    private readonly instance: Instance<Tx, Sync>,
    private readonly publishHeaders: (() => Record<string, string> | undefined) | undefined,
    /** Told the partitions each publish wrote, once its statements ran (in-process wake-ups). */
    private readonly onPublished?: (partitions: Iterable<{ outbox: string; partition: number }>) => void,
  ) {
    this.flow = new Flow(instance.adapter.sync);
  }

  publish(tx: Tx, input: PublishInput): MaybePromise<number, Sync> {
    return this.flow.map(
      this.flow.attempt(() => this.insert(tx, [input])),
      (ids) => ids[0]!,
    );
  }

  publishMany(tx: Tx, messages: readonly PublishInput[]): MaybePromise<number[], Sync> {
    return this.flow.attempt(() => {
      if (!Array.isArray(messages)) throw invalidOption('messages', 'an array of messages', messages);
      if (messages.length === 0) return this.flow.of([]);
      checkBatchLength(messages.length);
      return this.insert(tx, messages);
    });
  }

  private insert(tx: Tx, inputs: readonly PublishInput[]): MaybePromise<number[], Sync> {
    const groups = this.encodeByTable(inputs);
    const { adapter, settings } = this.instance;
    const { dialect } = adapter;
    const steps = groups.map((group) => () => {
      const notify = group.notify
        ? {
            channel: NOTIFY_CHANNEL,
            payloads: [...group.partitions.values()].map(({ outbox, partition }) =>
              notifyPayload(settings.name, outbox, partition),
            ),
          }
        : undefined;
      const work = dialect.insert(group.table, group.rows, { serialize: group.serialize, notify });
      // A batch (MySQL) runs one statement after another in the caller's transaction.
      const queries = queriesOf(work);
      return this.flow.map(
        this.flow.explained(
          () => this.flow.sequence(queries.map((query) => () => adapter.executeInTransaction(tx, query))),
          (error) => explainMissingSchema(dialect, group.table, error),
        ),
        (results) => readResults(work, results),
      );
    });
    return this.flow.map(this.flow.sequence(steps), (results) => {
      const ids = new Array<number>(inputs.length);
      groups.forEach((group, g) =>
        group.positions.forEach((position, i) => (ids[position] = results[g]![i]!)),
      );
      if (this.onPublished) this.onPublished(partitionsWritten(groups));
      emit(channels.publish, () => ({
        instance: settings.name,
        outboxes: [...new Set(inputs.map((i) => i.outbox))],
        count: inputs.length,
        ids,
      }));
      return ids;
    });
  }

  private encodeByTable(inputs: readonly PublishInput[]): EncodedGroup[] {
    const groups: EncodedGroup[] = [];
    const { capabilities } = this.instance.adapter.dialect;
    let bytes = 0;
    inputs.forEach((input, position) => {
      const { outbox, row } = this.encode(input);
      bytes += row.payload.length + (row.headers?.length ?? 0);
      checkBatchBytes(bytes);
      let group = groups.find((g) => sameTable(g.table, outbox.table));
      if (group === undefined) {
        group = {
          table: outbox.table,
          rows: [],
          positions: [],
          partitions: new Map(),
          serialize: false,
          notify: false,
        };
        groups.push(group);
      }
      group.rows.push(row);
      group.positions.push(position);
      if (outbox.notify) {
        group.notify = true;
        const key = `${outbox.name}:${row.partition}`;
        if (!group.partitions.has(key))
          group.partitions.set(key, { outbox: outbox.name, partition: row.partition });
      }
      if (outbox.serializeWrites && capabilities.advisoryLocks) group.serialize = true;
    });
    return groups;
  }

  /**
   * One message, checked and encoded. Whatever the input's own code throws on the way (a getter, a
   * Proxy, a `toJSON`, `publishHeaders`) is reported as `INVALID_MESSAGE`: nothing was sent.
   */
  private encode(input: PublishInput): { outbox: ResolvedOutbox; row: InsertRow } {
    if (typeof input !== 'object' || input === null)
      throw invalidOption('messages', 'messages made by defineMessage or { outbox, payload } objects', input);
    try {
      const outbox = this.instance.outbox(input.outbox);
      const options = { groupKey: input.groupKey, headers: input.headers, type: input.type };
      const shared = this.publishHeaders?.();
      const row = encodeMessage(
        outbox,
        input.payload,
        options,
        this.instance.adapter.dialect.capabilities,
        shared,
      );
      return { outbox, row };
    } catch (error) {
      if (isOutboxerError(error)) throw error;
      throw new OutboxerError(
        'INVALID_MESSAGE',
        `Reading the message to publish threw: ${describeError(error, 500)}. Nothing was written.`,
        { cause: error },
      );
    }
  }
}

/** Each partition a publish wrote, once (a publishMany of thousands of rows touches a few). */
function partitionsWritten(groups: readonly EncodedGroup[]): Array<{ outbox: string; partition: number }> {
  const written = new Map<string, { outbox: string; partition: number }>();
  for (const { rows } of groups) {
    for (const { outbox, partition } of rows)
      written.set(`${outbox}\u0000${partition}`, { outbox, partition });
  }
  return [...written.values()];
}
