import { expect, test } from 'vitest';
import { main } from './demo.js';

test('the demo delivers every event, in order per order, with retries and no phantom', async () => {
  const result = await main({ orders: 60, quiet: true });
  expect(result.orders).toBe(60);
  expect(result.delivered).toBe(180);
  expect(result.retries).toBeGreaterThan(0);
  expect(result.outOfOrder).toBe(0);
  expect(result.counts).toMatchObject({ pending: 0, delivered: 0, dead: 0 });
});
