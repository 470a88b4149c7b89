import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { withScratchDatabase } from '../test/support/scratch-database.js';
import { main } from './inbox-order.js';
import { printedBy } from './relays/printed.js';

test('the order example: a late message is handled, reported, and does not move the status back', async () => {
  const lines = await withScratchDatabase((url) => printedBy(() => main(url)));
  expect(lines).toEqual([
    '#1 placed',
    '#5 shipped',
    '#3 paid: late, after #5; status kept',
    '#3 paid: duplicate, skipped',
    'status of order 1: shipped',
  ]);
  // docs/inbox.md shows what it prints.
  const docs = readFileSync(new URL('../docs/inbox.md', import.meta.url), 'utf8');
  expect(docs).toContain(['```', ...lines, '```'].join('\n'));
});
