import { expect, test } from 'vitest';
import { main } from './sqs.js';
import { printedBy } from './printed.js';

// Runs the documented example against ElasticMQ (scripts/services/sqs.sh) and reads what it printed.
test('the SQS example relays both messages of an order to a FIFO queue, in order', async () => {
  expect(await printedBy(main)).toEqual([
    'order:1 #1 OrderPlaced {"orderId":1,"total":4200}',
    'order:1 #2 OrderPaid {"orderId":1}',
  ]);
});
