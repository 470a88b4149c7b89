import { expect, test } from 'vitest';
import { withScratchDatabase } from '../../test/support/scratch-database.js';
import { printedBy } from '../relays/printed.js';
import { main } from './kafka.js';

test('the Kafka receiver example ships each step once though the topic was read twice', async () => {
  expect(await withScratchDatabase((url) => printedBy(() => main(url)))).toEqual([
    'order:1 #1 placed: shipped',
    'order:1 #2 paid: shipped',
    'the topic read again from the start:',
    '#1: already handled, skipped',
    '#2: already handled, skipped',
    'order 1 shipped steps: placed, paid',
  ]);
});
