import { expect, test } from 'vitest';
import { backoffDelay } from './backoff.js';

const backoff = { min: 1000, max: 60_000 };

test('doubles from min per failure and stops at max', () => {
  const middle = () => 0.5; // no jitter
  expect([1, 2, 3, 4, 5, 6, 7, 8].map((n) => backoffDelay(n, backoff, middle))).toEqual([
    1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000,
  ]);
  expect(backoffDelay(10_000, backoff, middle)).toBe(60_000);
});

test('jitter stays within ±20% and within [min, max]', () => {
  expect(backoffDelay(3, backoff, () => 0)).toBe(3200);
  expect(backoffDelay(3, backoff, () => 0.999999)).toBe(4800);
  expect(backoffDelay(1, backoff, () => 0)).toBe(1000);
  expect(backoffDelay(9, backoff, () => 0.999999)).toBe(60_000);
});

test('a zero minimum retries at once', () => {
  expect(backoffDelay(5, { min: 0, max: 0 })).toBe(0);
});
