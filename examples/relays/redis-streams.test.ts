import { expect, test } from 'vitest';
import { withScratchDatabase } from '../../test/support/scratch-database.js';
import { main } from './redis-streams.js';
import { printedBy } from './printed.js';

// Runs the documented example against a scratch database and Redis on 127.0.0.1:6379, and reads
// what it printed.
test('the Redis Streams example appends both messages of an order to a stream, in order', async () => {
  expect(await withScratchDatabase((url) => printedBy(() => main(url)))).toEqual([
    'order:1 #1 OrderPlaced {"orderId":1,"total":4200}',
    'order:1 #2 OrderPaid {"orderId":1}',
  ]);
});
