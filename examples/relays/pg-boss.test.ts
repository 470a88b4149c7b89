import { expect, test } from 'vitest';
import { withScratchDatabase } from '../../test/support/scratch-database.js';
import { main } from './pg-boss.js';
import { printedBy } from './printed.js';

// Runs the documented example against a scratch database (the outbox and pg-boss share it), and
// reads what its worker printed.
test('the pg-boss example turns both messages of an order into jobs, run in order', async () => {
  // jsonb stores object keys in its own order (shorter keys first), not in the order they were written.
  expect(await withScratchDatabase((url) => printedBy(() => main(url)))).toEqual([
    'order:1 #1 OrderPlaced {"total":4200,"orderId":1}',
    'order:1 #2 OrderPaid {"orderId":1}',
  ]);
});
