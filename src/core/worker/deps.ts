import type { DatabaseAdapter } from '../database.js';
import { explainMissingSchema } from '../errors.js';
import type { Logger } from '../logger.js';
import type { ResolvedOutbox } from '../options.js';
import type { Relay } from '../relay.js';

export interface WorkerDeps {
  readonly adapter: DatabaseAdapter<unknown, boolean>;
  readonly outbox: ResolvedOutbox;
  /** The outbox's destination. */
  readonly destination: Relay;
  readonly instance: string;
  readonly leaseTimeout: number;
  readonly maxErrorLength: number;
  readonly logger: Logger;
  /**
   * True while this node's notification listener is connected (`notify` on a dialect with
   * notifications): an idle worker then sleeps until a notification, a retry falling due, or the
   * coordinator finding work, instead of polling every `pollInterval`. Absent: always polls.
   */
  readonly listening?: () => boolean;
}

/**
 * A failure of an outbox's background work (polls, settles, coordination, pruning, tallies) as
 * logs and telemetry report it: a table or column migrate() has not created comes out as
 * SCHEMA_MISSING, which says so and what to run, with the database's error as its cause.
 */
export function backgroundFailure(deps: Pick<WorkerDeps, 'adapter' | 'outbox'>, error: unknown): unknown {
  return explainMissingSchema(deps.adapter.dialect, deps.outbox.table, error);
}
