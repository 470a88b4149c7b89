import { expect, test } from 'vitest';
import { withScratchDatabase } from '../../test/support/scratch-database.js';
import { main } from './kafka.js';
import { printedBy } from './printed.js';

// Runs the documented example against a scratch database and the Kafka broker on 127.0.0.1:9092,
// and reads what it printed.
test('the Kafka example relays both messages of an order, keyed and in order', async () => {
  expect(await withScratchDatabase((url) => printedBy(() => main(url)))).toEqual([
    'order:1 #1 OrderPlaced {"orderId":1,"total":4200}',
    'order:1 #2 OrderPaid {"orderId":1}',
  ]);
});
