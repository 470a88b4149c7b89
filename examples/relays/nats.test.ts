import { expect, test } from 'vitest';
import { withScratchDatabase } from '../../test/support/scratch-database.js';
import { main } from './nats.js';
import { printedBy } from './printed.js';

// Runs the documented example against a scratch database and NATS JetStream on 127.0.0.1:4222, and
// reads what it printed.
test('the NATS example relays both messages of an order to a stream, in order', async () => {
  expect(await withScratchDatabase((url) => printedBy(() => main(url)))).toEqual([
    'order:1 #1 placed {"orderId":1,"total":4200}',
    'order:1 #2 paid {"orderId":1}',
  ]);
});
