import { run } from './database.js';
import type { WorkerDeps } from './worker/index.js';

/**
 * The upkeep of the tallies `counts()` sums, on a dialect that keeps them, run by the node holding
 * partition 0 in its housekeeping: sums them into one row a partition, and recounts them against
 * the rows every `recountInterval` (the database records when, for the whole cluster). `due`, from
 * the heartbeat where the dialect reports it, skips what has no work: an idle outbox sends none.
 */
export async function upkeepTallies(
  deps: WorkerDeps,
  due: { readonly compact: boolean; readonly recount: boolean } = { compact: true, recount: true },
): Promise<void> {
  const { adapter, outbox, logger } = deps;
  const tallies = adapter.dialect.tallies;
  if (tallies === undefined) return;
  if (due.compact) await run(adapter, tallies.compact(outbox.table, outbox.name));
  if (!due.recount) return;
  const drift = await run(adapter, tallies.recount(outbox.table, outbox.name, outbox.recountInterval));
  if (drift === undefined) return;
  if (Object.values(drift).some((n) => n !== 0)) {
    logger.warn(
      'outboxer: counts() was off from the rows (changed by hand, or by a node of an older version); recounted',
      { outbox: outbox.name, correctedBy: drift },
    );
  }
}
