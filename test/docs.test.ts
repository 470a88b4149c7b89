/**
 * Docs stay true: a code block preceded by `<!-- example: path -->` must be exactly that file,
 * which the test suite runs (or typechecks). Relative links between docs must resolve. Every
 * package a guide's TypeScript imports is on one of its `npm install` lines, and the README's
 * Options section names every option src/core/options.ts accepts.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, test } from 'vitest';
import { allDocs, embeddedExamples, importedPackages, installedPackages, root } from './support/guides.js';

const docs = allDocs();

describe.each(docs)('%s', (file) => {
  const text = readFileSync(join(root, file), 'utf8');

  test('embedded examples are the files the tests run', () => {
    for (const { path, code } of embeddedExamples(text)) {
      expect(code, `${file}: the block for ${path}`).toBe(readFileSync(join(root, path), 'utf8'));
    }
  });

  test('relative links resolve', () => {
    for (const match of text.matchAll(/\]\(((?!https?:|#|mailto:)[^)#\s]+)(#[^)]*)?\)/g)) {
      const target = resolve(root, dirname(file), match[1]!);
      expect(existsSync(target), `${file} links to ${match[1]}`).toBe(true);
    }
  });
});

// Every page a user reads, not only the adapter and relay guides: ordering, testing and operations
// embed examples too.
const guides = docs.filter((file) => file !== 'CHANGELOG.md');

describe.each(guides)('%s', (file) => {
  test('its npm install lines name every package its TypeScript examples import', () => {
    const text = readFileSync(join(root, file), 'utf8');
    const installed = installedPackages(text);
    const missing = [...importedPackages(text)].filter((name) => !installed.has(name));
    expect(missing, `${file} imports these without an npm install line naming them`).toEqual([]);
  });
});

test('the import and install parsers read what the guides write', () => {
  const text = [
    '```sh',
    'npm install outboxer pg-boss@10 @scope/pkg@^2 # or other-pkg',
    '```',
    '- Install it yourself (`npm install undici`) and:',
    '  ```ts',
    "  import { Agent } from 'undici';",
    '  ```',
    '```ts',
    "import 'reflect-metadata';",
    "import type { AddressInfo } from 'node:net';",
    "import { readFileSync } from 'fs';",
    "import { drizzle } from 'drizzle-orm/better-sqlite3';",
    "import { x } from '@scope/pkg/sub';",
    "import { y } from 'outboxer/pg';",
    "import { z } from './support.js';",
    "const sqs = await import('@aws-sdk/client-sqs');",
    '```',
  ].join('\n');
  expect([...importedPackages(text)].sort()).toEqual(
    ['@aws-sdk/client-sqs', '@scope/pkg', 'drizzle-orm', 'reflect-metadata', 'undici'].sort(),
  );
  expect([...installedPackages(text)]).toEqual(
    expect.arrayContaining(['outboxer', 'pg-boss', '@scope/pkg', 'other-pkg', 'undici']),
  );
  const commented = 'npm install --save-dev @types/pg   # with TypeScript: pg-types, or better-sqlite3';
  expect([
    ...installedPackages(commented, (word) => /^[a-z@][\w@/.-]*$/.test(word) && word !== 'with'),
  ]).toEqual(['@types/pg', 'pg-types', 'or', 'better-sqlite3']);
});

/** The string literals of `const NAME = [ ... ] as const` in src/core/options.ts. */
function optionKeys(name: string): string[] {
  const source = readFileSync(join(root, 'src/core/options.ts'), 'utf8');
  const list = new RegExp(`const ${name} = \\[([^\\]]*)\\]`).exec(source)?.[1];
  expect(list, `${name} in src/core/options.ts`).toBeDefined();
  return [...list!.matchAll(/'([^']+)'/g)].map((match) => match[1]!);
}

test("the README's Options section names every instance and outbox option", () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const section = /^## Options\n([\s\S]*?)^## /m.exec(readme)?.[1] ?? '';
  const instanceKeys = optionKeys('INSTANCE_KEYS');
  const outboxKeys = optionKeys('OUTBOX_KEYS');
  expect(instanceKeys).toContain('database');
  expect(outboxKeys).toContain('batchSize');
  const missing = [...new Set([...instanceKeys, ...outboxKeys])].filter(
    (key) => !section.includes(`\`${key}\``) && !section.includes(`\`${key}:`),
  );
  expect(missing, 'options missing from the README (## Options)').toEqual([]);
});
