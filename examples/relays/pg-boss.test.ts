import { expect, test } from 'vitest';
import { main } from './pg-boss.js';
import { printedBy } from './printed.js';

// Runs the documented example against the Postgres on 127.0.0.1:5432 and reads what its worker printed.
test('the pg-boss example turns both messages of an order into jobs, run in order', async () => {
  // jsonb stores object keys in its own order (shorter keys first), not in the order they were written.
  expect(await printedBy(main)).toEqual([
    'order:1 #1 OrderPlaced {"total":4200,"orderId":1}',
    'order:1 #2 OrderPaid {"orderId":1}',
  ]);
});
