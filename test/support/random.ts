// The chaos harness's seeded PRNG (mulberry32) and sleep: failures in tests are pseudo-random but
// reproducible.
import { sleep } from '../../chaos/random.js';

export { seededRandom, sleep } from '../../chaos/random.js';

/**
 * How much longer than its nominal timeout a wait goes on: the timeouts bound liveness ("this
 * happens at all"), not speed, and CI shares two cores with other work. Speed is the benchmark's.
 */
const WAIT_SLACK = 3;

/** Waits until `check` holds, failing after `timeout` ms (stretched by {@link WAIT_SLACK}). */
export async function waitUntil(
  check: () => Promise<boolean> | boolean,
  timeout = 30_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeout * WAIT_SLACK;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(25);
  }
  throw new Error(`Timed out after ${timeout * WAIT_SLACK} ms waiting for ${what}`);
}
