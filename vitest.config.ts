import { existsSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const root = (path: string) => fileURLToPath(new URL(path, import.meta.url));

// Tests import the package by its public subpaths (`outboxer/pg`, `outboxer/kafka`…), which map to
// the adapter and relay folders, as in package.json's exports and tsconfig's paths.
const subpaths = ['adapters', 'relays', 'integrations'].flatMap((kind) =>
  readdirSync(root(`./src/${kind}`), { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(root(`./src/${kind}/${entry.name}/index.ts`)))
    .map((entry) => ({
      find: new RegExp(`^outboxer/${entry.name.replace(/[.-]/g, '\\$&')}$`),
      replacement: root(`./src/${kind}/${entry.name}/index.ts`),
    })),
);

export default defineConfig({
  resolve: { alias: [{ find: /^outboxer$/, replacement: root('./src/index.ts') }, ...subpaths] },
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'examples/**/*.test.ts', 'bench/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    maxWorkers: 2,
  },
});
