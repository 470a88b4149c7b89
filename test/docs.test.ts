/**
 * Docs stay true: a code block preceded by `<!-- example: path -->` must be exactly that file,
 * which the test suite runs (or typechecks). Relative links between docs must resolve. Every
 * package a guide's TypeScript imports is on one of its `npm install` lines, and the README's
 * Options section names every option src/core/options.ts accepts.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, test } from 'vitest';

const root = resolve(import.meta.dirname, '..');

function markdownFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? markdownFiles(join(dir, entry.name))
      : entry.name.endsWith('.md')
        ? [join(dir, entry.name)]
        : [],
  );
}

const docs = ['README.md', 'CHANGELOG.md', ...markdownFiles('docs')].filter((file) =>
  existsSync(join(root, file)),
);

describe.each(docs)('%s', (file) => {
  const text = readFileSync(join(root, file), 'utf8');

  test('embedded examples are the files the tests run', () => {
    for (const match of text.matchAll(/<!-- example: (\S+) -->\n```\w*\n([\s\S]*?)```/g)) {
      const [, path, code] = match;
      expect(code, `${file}: the block for ${path}`).toBe(readFileSync(join(root, path!), 'utf8'));
    }
  });

  test('relative links resolve', () => {
    for (const match of text.matchAll(/\]\(((?!https?:|#|mailto:)[^)#\s]+)(#[^)]*)?\)/g)) {
      const target = resolve(root, dirname(file), match[1]!);
      expect(existsSync(target), `${file} links to ${match[1]}`).toBe(true);
    }
  });
});

/** The package a bare import specifier names (`@scope/name/sub` → `@scope/name`), or undefined. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:'))
    return undefined;
  if (builtinModules.includes(specifier.split('/')[0]!)) return undefined;
  const name = specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');
  return name === 'outboxer' ? undefined : name;
}

/** Packages imported by the ```ts blocks of a markdown text (fences may be indented, in lists). */
function importedPackages(text: string): Set<string> {
  const packages = new Set<string>();
  for (const [, , code] of text.matchAll(/^([ \t]*)```ts\n([\s\S]*?)^\1```/gm)) {
    for (const [, specifier] of code!.matchAll(
      /(?:\bfrom\s+|^\s*import\s+|\bimport\s*\(\s*)['"]([^'"\n]+)['"]/gm,
    )) {
      const name = packageOf(specifier!);
      if (name) packages.add(name);
    }
  }
  return packages;
}

/** Every name on an `npm install` line of the text, in a shell block or inline code. */
function installedPackages(text: string): Set<string> {
  const packages = new Set<string>();
  for (const [, rest] of text.matchAll(/\bnpm (?:install|i|add)\b([^`\n]*)/g)) {
    for (const word of rest!.split(/[\s,]+/)) {
      if (word && !word.startsWith('-')) packages.add(word.replace(/(.)@.*$/, '$1'));
    }
  }
  return packages;
}

const guides = ['README.md', ...markdownFiles('docs/relays'), ...markdownFiles('docs/adapters')];

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
