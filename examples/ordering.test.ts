import { readFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { main } from './ordering.js';

test('the ordering example: per-group order, strict retry holds the group, dead-letter moves on', async () => {
  const printed: string[] = [];
  const { received, counts } = await main((line) => void printed.push(line));
  const others = ['order:1 placed', 'order:2 placed', 'order:2 paid', 'order:2 shipped'];
  // Strict: order 1's later event waited for its failing payment; order 2 never waited.
  expect(received.strict).toEqual([...others, 'order:1 paid', 'order:1 shipped']);
  // Dead-letter: order 1 moved on without its payment, which came back late through retryDead().
  expect(received.deadLetter).toEqual([...others, 'order:1 shipped', 'order:1 paid']);
  for (const outbox of ['strict', 'deadLetter'] as const)
    expect(counts[outbox]).toMatchObject({ pending: 0, delivered: 0, dead: 0 });
  // docs/ordering.md shows what it prints.
  const docs = readFileSync(new URL('../docs/ordering.md', import.meta.url), 'utf8');
  expect(docs).toContain(['```text', ...printed, '```'].join('\n'));
});
