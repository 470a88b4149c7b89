import type { Dialect } from './database.js';
import { describeError } from './errors.js';
import { backgroundFailure, type WorkerDeps } from './worker.js';

type Tallies = NonNullable<Dialect['tallies']>;

/**
 * The upkeep of the tallies `counts()` sums, on a dialect that keeps them, run by the node holding
 * partition 0 at each coordination tick: sums them into one row a partition, and recounts them
 * against the rows every `recountInterval` (the database records when, for the whole cluster).
 */
export class TallyUpkeep {
  private running: Promise<void> | undefined;

  constructor(private readonly deps: WorkerDeps) {}

  /** Starts a round unless one is running. */
  run(): void {
    const tallies = this.deps.adapter.dialect.tallies;
    if (tallies === undefined || this.running !== undefined) return;
    this.running = this.round(tallies)
      .catch((error: unknown) => {
        this.deps.logger.error('outboxer: upkeep of the counts() tallies failed; retrying', {
          outbox: this.deps.outbox.name,
          error: describeError(backgroundFailure(this.deps, error), 500),
        });
      })
      .finally(() => {
        this.running = undefined;
      });
  }

  async stop(): Promise<void> {
    await this.running;
  }

  private async round(tallies: Tallies): Promise<void> {
    const { adapter, outbox, logger } = this.deps;
    await adapter.execute(tallies.compact(outbox.table, outbox.name));
    const [row] = await adapter.execute(tallies.recount(outbox.table, outbox.name, outbox.recountInterval));
    if (row === undefined) return;
    const drift = { pending: Number(row.pending), dead: Number(row.dead), delivered: Number(row.delivered) };
    if (Object.values(drift).some((n) => n !== 0)) {
      logger.warn(
        'outboxer: counts() was off from the rows (changed by hand, or by a node of an older version); recounted',
        { outbox: outbox.name, correctedBy: drift },
      );
    }
  }
}
