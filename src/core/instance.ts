/**
 * What the parts of an `Outboxer` share: the adapter, the resolved settings and outboxes, the
 * logger and this node's id. The facade (outboxer.ts) builds it once and hands it to the
 * publisher, the relaying node and the administration.
 */
import type { DatabaseAdapter } from './database.js';
import { OutboxerError } from './errors.js';
import type { Logger } from './logger.js';
import type { InstanceSettings, ResolvedOutbox } from './options.js';

/** The adapter as the parts that never touch the caller's transaction see it. */
export type EngineAdapter = DatabaseAdapter<never, boolean>;

export class Instance<Tx, Sync extends boolean> {
  constructor(
    readonly adapter: DatabaseAdapter<Tx, Sync>,
    readonly settings: InstanceSettings,
    readonly outboxes: ReadonlyMap<string, ResolvedOutbox>,
    readonly logger: Logger,
    readonly nodeId: string,
  ) {}

  /** The adapter for statements of the engine's own (never inside the caller's transaction). */
  get engine(): EngineAdapter {
    return this.adapter as EngineAdapter;
  }

  /** The resolved options of an outbox; throws `UNKNOWN_OUTBOX` for a name that was not configured. */
  outbox(name: string): ResolvedOutbox {
    const outbox = this.outboxes.get(name);
    if (outbox === undefined) {
      throw new OutboxerError(
        'UNKNOWN_OUTBOX',
        `Unknown outbox ${JSON.stringify(name)}. Configured outboxes: ${[...this.outboxes.keys()].join(', ')}.`,
      );
    }
    return outbox;
  }
}
