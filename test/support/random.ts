// The chaos harness's seeded PRNG (mulberry32) and sleep: failures in tests are pseudo-random but
// reproducible.
import { sleep } from '../../chaos/random.js';

export { seededRandom, sleep } from '../../chaos/random.js';

export async function waitUntil(
  check: () => Promise<boolean> | boolean,
  timeout = 30_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(25);
  }
  throw new Error(`Timed out after ${timeout} ms waiting for ${what}`);
}
