import { expect, test } from 'vitest';
import { withScratchDatabase } from '../test/support/scratch-database.js';
import { main } from './inbox-store.js';
import { printedBy } from './relays/printed.js';

test('the store-then-process example stores a redelivery once and ships each step once, in order', async () => {
  const lines = await withScratchDatabase((url) => printedBy(() => main(url)));
  expect(lines).toEqual([
    'm-1: stored',
    'm-2: stored',
    'm-3: stored',
    'm-1: already stored, skipped',
    'm-1 placed: shipped',
    'm-2 paid: the carrier is down; retried later',
    'm-2 paid: shipped',
    'm-3 packed: shipped',
    'order 1 shipped steps: placed, paid, packed',
  ]);
});
