import { expect, test } from 'vitest';
import { main } from './rabbitmq.js';
import { printedBy } from './printed.js';

// Runs the documented example against RabbitMQ on 127.0.0.1:5672 and reads what it printed.
test('the RabbitMQ example relays both messages of an order through an exchange, in order', async () => {
  expect(await printedBy(main)).toEqual([
    'order:1 #1 order.placed {"orderId":1,"total":4200}',
    'order:1 #2 order.paid {"orderId":1}',
  ]);
});
