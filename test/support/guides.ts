/**
 * Reading the guides as a user does: the markdown files, the examples they embed, the packages
 * their TypeScript imports and the packages their `npm install` lines name. Shared by the docs
 * test (the guides agree with the source tree) and the packed-package test (they run as written).
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, resolve } from 'node:path';

export const root = resolve(import.meta.dirname, '../..');

/** Markdown files under `dir` (relative to the repository), depth first. */
export function markdownFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? markdownFiles(join(dir, entry.name))
      : entry.name.endsWith('.md')
        ? [join(dir, entry.name)]
        : [],
  );
}

/** README, CHANGELOG and every guide under docs/. */
export function allDocs(): string[] {
  return ['README.md', 'CHANGELOG.md', ...markdownFiles('docs')].filter((file) =>
    existsSync(join(root, file)),
  );
}

export function readDoc(file: string): string {
  return readFileSync(join(root, file), 'utf8');
}

/** The blocks preceded by `<!-- example: path -->`: the file each must equal, and the block's text. */
export function embeddedExamples(text: string): Array<{ path: string; code: string }> {
  return [...text.matchAll(/<!-- example: (\S+) -->\n```\w*\n([\s\S]*?)```/g)].map(([, path, code]) => ({
    path: path!,
    code: code!,
  }));
}

/** The package a bare import specifier names (`@scope/name/sub` → `@scope/name`), or undefined. */
export function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:'))
    return undefined;
  if (builtinModules.includes(specifier.split('/')[0]!)) return undefined;
  const name = specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');
  return name === 'outboxer' ? undefined : name;
}

/** Packages imported by TypeScript source text. */
export function packagesImportedBy(code: string): Set<string> {
  const packages = new Set<string>();
  for (const [, specifier] of code.matchAll(
    /(?:\bfrom\s+|^\s*import\s+|\bimport\s*\(\s*)['"]([^'"\n]+)['"]/gm,
  )) {
    const name = packageOf(specifier!);
    if (name) packages.add(name);
  }
  return packages;
}

/** Packages imported by the ```ts blocks of a markdown text (fences may be indented, in lists). */
export function importedPackages(text: string): Set<string> {
  const packages = new Set<string>();
  for (const [, , code] of text.matchAll(/^([ \t]*)```ts\n([\s\S]*?)^\1```/gm)) {
    for (const name of packagesImportedBy(code!)) packages.add(name);
  }
  return packages;
}

/**
 * Every package an `npm install` line of the text names, in a shell block or inline code. Words of
 * a trailing `# comment` count only when `isPackage` accepts them: comments name alternatives
 * (`# or better-sqlite3`) beside prose (`# with TypeScript: node-postgres's types`).
 */
export function installedPackages(
  text: string,
  isPackage: (word: string) => boolean = () => true,
): Set<string> {
  const packages = new Set<string>();
  const joined = text.replace(/\\\n\s*/g, ' '); // shell line continuations
  for (const [, command, comment] of joined.matchAll(/\bnpm (?:install|i|add)\b([^`\n#]*)(#[^`\n]*)?/g)) {
    const words = (text: string | undefined) =>
      (text ?? '').split(/[\s,]+/).filter((w) => w && !w.startsWith('-'));
    const named = [...words(command), ...words(comment?.slice(1)).filter(isPackage)];
    for (const word of named) packages.add(word.replace(/(.)@.*$/, '$1'));
  }
  return packages;
}
