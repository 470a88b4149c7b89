import { expect, test } from 'vitest';
import { nodeSqliteMissing } from '../test/support/node-sqlite.js';
import { main } from './demo.js';

test('the demo delivers every event, in order per order, with retries and no phantom', async () => {
  const result = await main({ orders: 60, quiet: true });
  expect(result.orders).toBe(60);
  // A first run needs no native module where node:sqlite exists (Node 22.16+).
  expect(result.library).toBe(nodeSqliteMissing === undefined ? 'node:sqlite' : 'better-sqlite3');
  expect(result.delivered).toBe(180);
  expect(result.retries).toBeGreaterThan(0);
  expect(result.outOfOrder).toBe(0);
  expect(result.counts).toMatchObject({ pending: 0, delivered: 0, dead: 0 });
});
