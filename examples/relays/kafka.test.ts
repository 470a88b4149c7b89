import { expect, test } from 'vitest';
import { engineMismatch } from '../../test/support/engines.js';
import { withScratchDatabase } from '../../test/support/scratch-database.js';
import { printedBy } from './printed.js';

// The example uses @platformatic/kafka as installed (2.x), which needs a newer Node than outboxer's
// oldest (CI runs the examples there too): on such a Node the test is skipped, saying why, and the
// example is not even loaded.
const unsupported = engineMismatch('@platformatic/kafka');

// Runs the documented example against a scratch database and the Kafka broker on 127.0.0.1:9092,
// and reads what it printed.
test('the Kafka example relays both messages of an order, keyed and in order', async (context) => {
  if (unsupported !== undefined) context.skip(unsupported);
  const { main } = await import('./kafka.js');
  expect(await withScratchDatabase((url) => printedBy(() => main(url)))).toEqual([
    'order:1 #1 OrderPlaced {"orderId":1,"total":4200}',
    'order:1 #2 OrderPaid {"orderId":1}',
  ]);
});
