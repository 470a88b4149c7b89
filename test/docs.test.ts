/**
 * Docs stay true: a code block preceded by `<!-- example: path -->` must be exactly that file,
 * which the test suite runs (or typechecks). Relative links between docs must resolve.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
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
