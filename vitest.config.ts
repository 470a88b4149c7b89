import { existsSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const root = (path: string) => fileURLToPath(new URL(path, import.meta.url));

// Tests import the package by its public subpaths (`outboxer/pg`, `outboxer/kafka`…), which map to
// the adapter and relay folders, as in package.json's exports and tsconfig's paths. With
// OUTBOXER_TEST_PACKAGE=dist they map to the built package instead (`npm run build` first): CI
// runs the built package that way on the oldest Node that package.json's engines declares.
const built = process.env.OUTBOXER_TEST_PACKAGE === 'dist';
const entry = (folder: string) => (built ? `./dist/${folder}/index.js` : `./src/${folder}/index.ts`);
const subpaths = ['adapters', 'relays', 'integrations'].flatMap((kind) =>
  readdirSync(root(`./src/${kind}`), { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(root(`./src/${kind}/${entry.name}/index.ts`)))
    .map((folder) => ({
      find: new RegExp(`^outboxer/${folder.name.replace(/[.-]/g, '\\$&')}$`),
      replacement: root(entry(`${kind}/${folder.name}`)),
    })),
);
if (built && !existsSync(root('./dist/index.js')))
  throw new Error('OUTBOXER_TEST_PACKAGE=dist: run npm run build first');

export default defineConfig({
  resolve: {
    alias: [
      { find: /^outboxer$/, replacement: root(built ? './dist/index.js' : './src/index.ts') },
      { find: /^outboxer\/dashboard$/, replacement: root(entry('dashboard')) },
      ...subpaths,
    ],
  },
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'examples/**/*.test.ts', 'bench/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    maxWorkers: 2,
  },
});
