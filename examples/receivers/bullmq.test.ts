import { expect, test } from 'vitest';
import { withScratchDatabase } from '../../test/support/scratch-database.js';
import { printedBy } from '../relays/printed.js';
import { main } from './bullmq.js';

test('the BullMQ receiver example ships each step once though the jobs were added twice', async () => {
  expect(await withScratchDatabase((url) => printedBy(() => main(url)))).toEqual([
    'order:1 #1 placed: shipped',
    'order:1 #2 paid: shipped',
    'the same jobs are added again:',
    '#1: already handled, completed',
    '#2: already handled, completed',
    'order 1 shipped steps: placed, paid',
  ]);
});
