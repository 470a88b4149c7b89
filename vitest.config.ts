import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const root = (path: string) => fileURLToPath(new URL(path, import.meta.url));
const { exports } = JSON.parse(readFileSync(root('./package.json'), 'utf8')) as {
  exports: Record<string, string | { import: string }>;
};

// Tests import the package by its public subpaths, which map to the sources the exports point at.
const alias = Object.entries(exports)
  .filter(([subpath, target]) => subpath !== './package.json' && typeof target === 'object')
  .map(([subpath, target]) => ({
    find: new RegExp(`^${(`outboxer${subpath.slice(1)}`).replace(/[/.-]/g, '\\$&')}$`),
    replacement: root((target as { import: string }).import.replace('./dist/', './src/').replace(/\.js$/, '.ts')),
  }));

export default defineConfig({
  resolve: { alias },
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'examples/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    maxWorkers: 2,
  },
});
