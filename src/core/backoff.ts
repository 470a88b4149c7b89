/**
 * Delay before the next attempt: exponential from `min`, doubling per failure, capped at `max`,
 * with ±20% jitter (still within [min, max]) so that a destination coming back is not hit by every
 * waiting message at the same instant.
 */
export function backoffDelay(
  failures: number,
  backoff: { readonly min: number; readonly max: number },
  random: () => number = Math.random,
): number {
  const exponent = Math.min(Math.max(failures - 1, 0), 52);
  const base = Math.min(backoff.max, backoff.min * 2 ** exponent);
  const jittered = base * (0.8 + 0.4 * random());
  return Math.round(Math.min(backoff.max, Math.max(backoff.min, jittered)));
}
