/**
 * docs/dashboard.md shows the mounting examples of test/dashboard/mounting/ as they are: the
 * files are type-checked with the repository (against the frameworks' few declarations there), and
 * each TypeScript block of the guide must be one of them, word for word.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';

const root = join(import.meta.dirname, '../..');

test('every TypeScript block of docs/dashboard.md is a type-checked mounting example', () => {
  const guide = readFileSync(join(root, 'docs/dashboard.md'), 'utf8');
  const blocks = [...guide.matchAll(/```ts\n([\s\S]*?)```/g)].map(([, code]) => code!);
  const dir = join(root, 'test/dashboard/mounting');
  const files = readdirSync(dir)
    .filter((name) => name.endsWith('.ts') && !name.endsWith('.d.ts') && name !== 'outboxer.ts')
    .map((name) => readFileSync(join(dir, name), 'utf8'));
  expect(blocks.length).toBe(files.length);
  for (const block of blocks) expect(files).toContain(block);
});
