import { expect, test } from 'vitest';
import { main } from './kafka.js';
import { printedBy } from './printed.js';

// Runs the documented example against the Kafka broker (scripts/services/kafka.sh) and reads what it printed.
test('the Kafka example relays both messages of an order, keyed and in order', async () => {
  expect(await printedBy(main)).toEqual([
    'order:1 #1 OrderPlaced {"orderId":1,"total":4200}',
    'order:1 #2 OrderPaid {"orderId":1}',
  ]);
});
