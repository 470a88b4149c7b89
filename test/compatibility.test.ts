/**
 * The README's compatibility table says what CI tests; this test derives every cell from where
 * that is decided, so the table cannot drift: the subpaths from package.json's exports, each
 * library's peer range from peerDependencies and its version from node_modules, the Node versions
 * from scripts/node/versions.sh and the floor of engines, and what runs on the oldest Node from
 * the test command in scripts/ci/runtimes.sh. Only which library belongs to which subpath is the
 * README's own (it names every peer dependency at least once).
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const pkg = JSON.parse(read('package.json')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
  exports: Record<string, unknown>;
  peerDependencies: Record<string, string>;
};

const readme = read('README.md');
const table = readme.slice(
  readme.indexOf('<!-- compatibility-table -->'),
  readme.indexOf('<!-- /compatibility-table -->'),
);
const [header, , ...rows] = table
  .split('\n')
  .filter((line) => line.startsWith('|'))
  .map((line) =>
    line
      .slice(1, -1)
      // A peer range's `||` is written `\|\|` inside a cell (a bare `|` ends the cell).
      .split(/(?<!\\)\|/)
      .map((cell) => cell.replace(/\\\|/g, '|').trim()),
  );

const versions = Object.fromEntries(
  [...read('scripts/node/versions.sh').matchAll(/^NODE_(\d+)=(\S+)$/gm)].map(([, major, version]) => [
    major,
    version,
  ]),
);
const floor = /^>=(\d+)\.(\d+)(?:\.(\d+))?$/.exec(pkg.engines.node);
const oldest = floor && `${floor[1]}.${floor[2]}.${floor[3] ?? 0}`;

/** The test paths of the built-package run on the oldest Node (its `npx vitest run …` command). */
const oldestRun = (() => {
  const script = read('scripts/ci/runtimes.sh').replace(/\\\n\s*/g, ' ');
  const command = /OUTBOXER_TEST_PACKAGE=dist npx vitest run ([^\n]*)/.exec(script)?.[1] ?? '';
  return command.split(/\s+/).filter((word) => word !== '' && !word.startsWith('-'));
})();

/** Whether a subpath has a documented example (examples/<kind>/<name>.ts, or <name>/example.ts beside its own files). */
function hasExample(name: string): boolean {
  return readdirSync(join(root, 'examples'), { withFileTypes: true }).some(
    (entry) =>
      entry.isDirectory() &&
      (existsSync(join(root, 'examples', entry.name, `${name}.ts`)) ||
        existsSync(join(root, 'examples', entry.name, name, 'example.ts'))),
  );
}

function installed(name: string): string {
  return (JSON.parse(read(`node_modules/${name}/package.json`)) as { version: string }).version;
}

/**
 * The versions of a library the tests run: the current line under its own name, then each older
 * line kept beside it as an npm alias (`"better-sqlite3-v12": "npm:better-sqlite3@12.11.1"`).
 */
function installedLines(name: string): string {
  const aliases = Object.entries(pkg.devDependencies)
    .filter(([, spec]) => spec.startsWith(`npm:${name}@`))
    .map(([alias]) => installed(alias))
    .sort((a, b) => b.localeCompare(a, 'en', { numeric: true }));
  return [installed(name), ...aliases].join(' + ');
}

/** What the oldest-Node run covers for a subpath. */
function onOldest(subpath: string): string {
  const name = subpath.replace(/^outboxer\/?/, '');
  const suite =
    name === ''
      ? oldestRun.includes('test/engine')
      : oldestRun.includes(`test/adapters/${name}.test.ts`) ||
        oldestRun.includes(`test/relays/${name}.test.ts`);
  if (suite) return 'suite, built';
  return oldestRun.includes('examples') && hasExample(name) ? 'examples' : 'not run';
}

test('the table has one column per Node that CI runs, the oldest being the floor of engines', () => {
  expect(oldest, `engines.node ${pkg.engines.node} is not >=X.Y[.Z]`).not.toBeNull();
  expect(header).toEqual([
    'Subpath',
    'Library (peer range)',
    'CI installs',
    `Node ${versions['24']}`,
    `Node ${versions['22']}`,
    `Node ${oldest} (oldest)`,
  ]);
  // Every adapter suite named for the oldest run exists (a renamed file would drop it silently).
  for (const path of oldestRun) expect(existsSync(join(root, path)), path).toBe(true);
});

test('one row per public subpath', () => {
  const subpaths = Object.keys(pkg.exports)
    .filter((key) => key !== './package.json')
    .map((key) => (key === '.' ? 'outboxer' : `outboxer/${key.slice(2)}`));
  expect(rows.map(([subpath]) => subpath!.replace(/`/g, '')).sort()).toEqual([...subpaths].sort());
});

test('each row names peer ranges as package.json declares them, the versions installed and what each Node runs', () => {
  const named = new Set<string>();
  for (const [cell, library, versionsCell, on24, on22, onOldestCell] of rows as string[][]) {
    const subpath = cell!.replace(/`/g, '');
    const libraries = [...library!.matchAll(/([@\w/.:-]+) \(([^)]+)\)/g)].map(([, name, range]) => ({
      name: name!,
      range: range!,
    }));
    const peers = libraries.filter(({ name }) => !name.startsWith('node:'));
    for (const { name, range } of peers) {
      named.add(name);
      expect(range, `${subpath}: the peer range of ${name}`).toBe(pkg.peerDependencies[name]);
    }
    expect(versionsCell, `${subpath}: the versions CI installs`).toBe(
      peers.map(({ name }) => installedLines(name)).join(', '),
    );
    expect([on24, on22], `${subpath}: the whole suite runs on Node 24 and 22`).toEqual(['suite', 'suite']);
    expect(onOldestCell, `${subpath}: what the oldest-Node run covers`).toBe(onOldest(subpath));
  }
  expect([...named].sort(), 'every peer dependency has a row').toEqual(
    Object.keys(pkg.peerDependencies).sort(),
  );
});

/** The guide of a subpath: docs/adapters/<name>.md, docs/relays/<name>.md or docs/<name>.md. */
function guideOf(subpath: string): string | undefined {
  const name = subpath.replace(/^outboxer\/?/, '');
  return [`docs/adapters/${name}.md`, `docs/relays/${name}.md`, `docs/${name}.md`].find(
    (path) => name !== '' && existsSync(join(root, path)),
  );
}

test('each guide names the versions CI tests its libraries with', () => {
  for (const [cell, library] of rows as string[][]) {
    const subpath = cell!.replace(/`/g, '');
    const peers = [...library!.matchAll(/([@\w/.:-]+) \(/g)]
      .map(([, name]) => name!)
      .filter((name) => !name.startsWith('node:') && name in pkg.peerDependencies);
    const guide = guideOf(subpath);
    if (peers.length === 0 || guide === undefined) continue;
    const line = read(guide)
      .split('\n')
      .find((text) => text.startsWith('**Tested with**'));
    expect(line, `${guide}: a "**Tested with**" line`).toBeDefined();
    for (const name of peers) {
      const versions = installedLines(name).split(' + ');
      const listed = [versions.slice(0, -1).join(', '), versions.at(-1)].filter(Boolean).join(' and ');
      expect(line, `${guide}: names ${name} ${listed}`).toContain(`${name} ${listed}`);
    }
  }
});
