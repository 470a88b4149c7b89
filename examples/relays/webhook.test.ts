import { expect, test } from 'vitest';
import { withScratchDatabase } from '../../test/support/scratch-database.js';
import { main } from './webhook.js';
import { printedBy } from './printed.js';

// Runs the documented example against a scratch database, with a real HTTP receiver on 127.0.0.1
// that verifies every signature.
test('the webhook example delivers both messages of an order, signed and in order', async () => {
  expect(await withScratchDatabase((url) => printedBy(() => main(url)))).toEqual([
    'order:1 #1 order.placed {"orderId":1,"total":4200}',
    'order:1 #2 order.paid {"orderId":1}',
  ]);
});
