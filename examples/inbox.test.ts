import { expect, test } from 'vitest';
import { withScratchDatabase } from '../test/support/scratch-database.js';
import { main } from './inbox.js';
import { printedBy } from './relays/printed.js';

test('the inbox example charges once for a message delivered twice', async () => {
  const lines = await withScratchDatabase((url) => printedBy(() => main(url)));
  expect(lines).toEqual([
    'orders-42: charged 4200',
    expect.stringMatching(/^orders-42: already handled at \d{4}-\d\d-\d\dT[\d:.]+Z, skipped$/),
    'charges for order 42: 1',
  ]);
});
