import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.tmp/**', 'test/adapters/prisma/**/generated/**', 'examples/adapters/prisma/**/generated/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  {
    // Library code never writes to the console: it takes an injectable logger.
    files: ['src/**/*.ts'],
    ignores: ['src/**/*.test.ts', 'src/cli/**'],
    rules: { 'no-console': 'error' },
  },
  {
    // Dependencies flow inward: the core knows no dialect, adapter or relay.
    files: ['src/core/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ group: ['../dialects/*', '../adapters/*', '../relays/*', 'pg', 'better-sqlite3'], message: 'src/core must not import a dialect, adapter, relay or driver.' }] }],
    },
  },
  {
    // Dialects are pure SQL builders: no drivers, adapters or relays.
    files: ['src/dialects/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ group: ['../../adapters/*', '../../relays/*', 'pg', 'better-sqlite3'], message: 'Dialects build SQL only.' }] }],
    },
  },
);
