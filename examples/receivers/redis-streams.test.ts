import { expect, test } from 'vitest';
import { withScratchDatabase } from '../../test/support/scratch-database.js';
import { printedBy } from '../relays/printed.js';
import { main } from './redis-streams.js';

test('the Redis Streams receiver example ships each step once though both entries were claimed again', async () => {
  expect(await withScratchDatabase((url) => printedBy(() => main(url)))).toEqual([
    'order:1 #1 placed: shipped',
    'order:1 #2 paid: shipped',
    'worker-1 died before acking; worker-2 claims its entries:',
    '#1: already handled, acked',
    '#2: already handled, acked',
    'order 1 shipped steps: placed, paid',
  ]);
});
