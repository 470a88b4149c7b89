import { expect, test } from 'vitest';
import { withScratchDatabase } from '../../test/support/scratch-database.js';
import { printedBy } from '../relays/printed.js';
import { main } from './sqs.js';

test('the SQS receiver example ships each step once though a delete was lost', async () => {
  expect(await withScratchDatabase((url) => printedBy(() => main(url)))).toEqual([
    'order:1 #1 placed: shipped',
    '#1: not deleted (the network dropped the request); SQS delivers it again',
    '#2: not deleted (sqsReceiver left this message in the queue); SQS delivers it again',
    'order:1 #2 paid: shipped', // printed by the handler, during receive(Messages)
    '#1: already handled, deleted', // printed from the results, after it
    'order 1 shipped steps: placed, paid',
  ]);
});
