import { expect, test } from 'vitest';
import { withScratchDatabase } from '../../test/support/scratch-database.js';
import { main } from './rabbitmq.js';
import { printedBy } from './printed.js';

// Runs the documented example against a scratch database and RabbitMQ on 127.0.0.1:5672, and reads
// what it printed.
test('the RabbitMQ example relays both messages of an order through an exchange, in order', async () => {
  expect(await withScratchDatabase((url) => printedBy(() => main(url)))).toEqual([
    'order:1 #1 order.placed {"orderId":1,"total":4200}',
    'order:1 #2 order.paid {"orderId":1}',
  ]);
});
