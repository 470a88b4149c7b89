/**
 * Counting what an idle node sends: an adapter that counts every statement the engine sends
 * through it, and a wait for the count to stop moving.
 */
import type { DatabaseAdapter } from '../../src/core/database.js';
import { waitUntil } from './random.js';

/** The adapter, counting every statement the engine sends through it. */
export function counting(database: DatabaseAdapter) {
  const counter = { statements: 0 };
  const adapter: DatabaseAdapter = {
    ...database,
    execute: (query) => {
      counter.statements += 1;
      return database.execute(query);
    },
    executeAtomically: (queries) => {
      counter.statements += queries.length;
      return database.executeAtomically(queries);
    },
  };
  return { adapter, counter };
}

/** Waits until `counter` has not moved for `quiet` ms: the node's workers all sleep. */
export async function untilQuiet(counter: { statements: number }, quiet = 400): Promise<void> {
  let last = -1;
  let since = Date.now();
  await waitUntil(
    () => {
      if (counter.statements !== last) {
        last = counter.statements;
        since = Date.now();
      }
      return Date.now() - since >= quiet;
    },
    10_000,
    'the node to go quiet',
  );
}
