import { expect, test } from 'vitest';
import { withScratchDatabase } from '../../test/support/scratch-database.js';
import { printedBy } from '../relays/printed.js';
import { main } from './webhook.js';

test('the webhook receiver example records each step once though the first webhook was sent twice', async () => {
  expect(await withScratchDatabase((url) => printedBy(() => main(url)))).toEqual([
    'order:1 #1 order.placed: recorded',
    '#1 answered 200 {"duplicate":true}',
    'order:1 #2 order.paid: recorded',
    '#2 answered 204',
    '3 requests, order 1 steps: placed, paid',
  ]);
});
