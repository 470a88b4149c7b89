import { expect, test } from 'vitest';
import { withScratchDatabase } from '../../test/support/scratch-database.js';
import { printedBy } from '../relays/printed.js';
import { main } from './nats.js';

test('the NATS receiver example ships each step once though everything was delivered twice', async () => {
  expect(await withScratchDatabase((url) => printedBy(() => main(url)))).toEqual([
    'order:1 #1 placed: shipped',
    'order:1 #2 paid: shipped',
    'the acks were lost; the server delivers again:',
    '#1: already handled, acked',
    '#2: already handled, acked',
    'order 1 shipped steps: placed, paid',
  ]);
});
