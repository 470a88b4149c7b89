import { expect, test } from 'vitest';
import { withScratchDatabase } from '../../test/support/scratch-database.js';
import { printedBy } from '../relays/printed.js';
import { main } from './pg-boss.js';

test('the pg-boss receiver example ships each step once though the batch was retried', async () => {
  expect(await withScratchDatabase((url) => printedBy(() => main(url)))).toEqual([
    'order:1 #1 placed: shipped',
    '#2 paid: the carrier is down; pg-boss retries the batch',
    'order:1 #2 paid: shipped', // printed by the handler, during the retried batch
    '#1: already handled', // printed from the batch's outcomes, after it
    'order 1 shipped steps: placed, paid',
  ]);
});
