/**
 * What a CLI command works on: an open database, the message table, and an `Outboxer` built for
 * one outbox from what the table records about it (`<table>_config`) and the command line.
 */
import type { Statement } from '../core/sql.js';
import { OutboxerError } from '../core/errors.js';
import { parseTableName, type QualifiedName } from '../core/identifiers.js';
import { silentLogger } from '../core/logger.js';
import type { Ordering, Retention } from '../core/options.js';
import { Outboxer } from '../core/outboxer.js';
import type { OpenDatabase } from './connection.js';
import type { CliOptions } from './options.js';
import { outboxHasRows, parkedMessage, recordedOutboxes } from './queries.js';
import { CliError } from './usage-error.js';

/** An outbox as the CLI knows it. */
export interface OutboxTarget {
  readonly name: string;
  /** From `<table>_config`, or `--partitions` for an outbox not recorded there; `undefined` when neither says. */
  readonly partitions: number | undefined;
  readonly ordering: Ordering;
  /** As recorded by the relaying nodes, when they recorded it. */
  readonly onDead?: 'continue' | 'park';
  /**
   * Whether it is in `<table>_config`: only a relaying node's start() writes there, so a recorded
   * outbox was relayed at some point, even when no node row says so any more (a clean stop
   * removes its row from `<table>_nodes`).
   */
  readonly recorded: boolean;
}

/** `partitions` when unknown: counts() then reports no row as orphaned, and the CLI shows "-". */
const UNKNOWN_PARTITIONS = 1024;

export class CliSession {
  readonly table: QualifiedName;
  private recorded: OutboxTarget[] | undefined;

  constructor(
    readonly options: CliOptions,
    readonly database: OpenDatabase,
  ) {
    this.table = parseTableName(options.table, '--table', options.schema);
  }

  /** `schema.table`, or `table` when the schema comes from the search path. */
  get tableName(): string {
    return this.table.schema === undefined ? this.table.name : `${this.table.schema}.${this.table.name}`;
  }

  async run<R>(statement: Statement<R>): Promise<R> {
    try {
      return statement.read(await this.database.adapter.execute(statement));
    } catch (error) {
      throw this.explain(error);
    }
  }

  /** A missing table says how to create it; anything else is passed on. */
  explain(error: unknown): unknown {
    const message = error instanceof Error ? error.message : String(error);
    if ((error as { code?: unknown }).code === '42P01' || /no such table/i.test(message)) {
      return new CliError(
        `Table ${this.tableName} or its companions do not exist (${message}). Run outboxer migrate, or check --table and --schema.`,
      );
    }
    return error;
  }

  /** Outboxes recorded in `<table>_config` (by relaying nodes at start()). */
  async recordedOutboxes(): Promise<OutboxTarget[]> {
    // The recorded partitions win over --partitions: they are what the workers read, and what
    // counts() finds orphans with.
    this.recorded ??= (await this.run(recordedOutboxes(this.table))).map((o) => ({ ...o, recorded: true }));
    return this.recorded;
  }

  /**
   * The outbox of `--outbox`, or the only recorded one. An outbox that is neither recorded nor has
   * any message is refused as unknown: most likely a typo.
   */
  async target(): Promise<OutboxTarget> {
    const recorded = await this.recordedOutboxes();
    const names = recorded.map((o) => o.name);
    const { outbox } = this.options;
    if (outbox === undefined) {
      if (recorded.length === 1) return recorded[0]!;
      throw new CliError(
        recorded.length === 0
          ? `No outbox is recorded in ${this.tableName}_config yet (a relaying node records its outboxes when it starts): pass --outbox <name>.`
          : `${this.tableName} holds several outboxes (${names.join(', ')}): pass --outbox <name>.`,
        2,
      );
    }
    const found = recorded.find((o) => o.name === outbox);
    if (found !== undefined) return found;
    if (!(await this.run(outboxHasRows(this.database.adapter.dialect, this.table, outbox)))) {
      throw new OutboxerError(
        'UNKNOWN_OUTBOX',
        `Unknown outbox ${JSON.stringify(outbox)}: it is not recorded in ${this.tableName}_config and has no message in ${this.tableName}.${names.length > 0 ? ` Recorded outboxes: ${names.join(', ')}.` : ''}`,
      );
    }
    return { name: outbox, partitions: this.options.partitions, ordering: 'group', recorded: false };
  }

  /**
   * The outbox's `onDead`: from `--on-dead`; with `auto`, as the relaying nodes recorded it, or,
   * for an outbox no relaying node recorded yet, `'park'` when a message is held behind a dead
   * one (only parking does that) and `'continue'` otherwise.
   */
  async onDead(target: OutboxTarget): Promise<'continue' | 'park'> {
    if (target.ordering === 'none') return 'continue';
    if (this.options.onDead !== 'auto') return this.options.onDead;
    if (target.onDead !== undefined) return target.onDead;
    const parked = await this.run(parkedMessage(this.database.adapter.dialect, this.table, target.name));
    return parked ? 'park' : 'continue';
  }

  /** A publish-only instance for one outbox: it starts nothing and only runs what it is asked. */
  outboxer(
    target: OutboxTarget,
    settings: { onDead?: 'continue' | 'park'; retention?: Retention } = {},
  ): Outboxer<never, boolean> {
    return new Outboxer({
      database: this.database.adapter,
      relay: false,
      // The CLI says on stderr what it finds, in its own words (counts' warnings); the engine's
      // warnings about the same figures would print it twice, the default logger being the console.
      logger: silentLogger,
      ...(this.options.schema === undefined ? {} : { schema: this.options.schema }),
      outboxes: {
        [target.name]: {
          table: this.options.table,
          partitions: target.partitions ?? UNKNOWN_PARTITIONS,
          ordering: target.ordering === 'total' && target.partitions !== 1 ? 'group' : target.ordering,
          onDead: settings.onDead ?? 'continue',
          ...(settings.retention === undefined ? {} : { retention: settings.retention }),
        },
      },
    });
  }
}
