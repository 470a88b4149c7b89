import { existsSync, readFileSync } from 'node:fs';
import { defineConfig } from 'tsup';

const { exports } = JSON.parse(readFileSync('package.json', 'utf8')) as {
  exports: Record<string, string | { import: string }>;
};

// One entry per public subpath, read from package.json so the two never disagree.
const entry = Object.fromEntries(
  Object.values(exports)
    .filter((target): target is { import: string } => typeof target === 'object')
    .map((target) => {
      const out = target.import.replace('./dist/', '').replace(/\.js$/, '');
      return [out, `src/${out}.ts`];
    })
    .filter(([, source]) => existsSync(source!)),
);

// The CLI (`npx outboxer`, package.json "bin") is an entry of its own.
entry['cli/index'] = 'src/cli/index.ts';

export default defineConfig({
  entry,
  format: ['esm'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'node22',
  splitting: true,
  treeshake: true,
});
