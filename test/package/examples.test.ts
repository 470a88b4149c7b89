/**
 * Every example the docs show runs from the packed package, the way a user runs it: the package is
 * built and packed (`npm pack`), installed into an empty app with `npm install`, and each guide's
 * examples are copied into a folder of their own whose node_modules holds only what that guide's
 * `npm install` lines name. Then `tsc` checks them all (strict, as in a user's project) and `tsx`
 * runs each one against the real services. Nothing resolves into this repository's source tree.
 *
 * Versions: each package is installed at the version this repository's lockfile tests, so a run
 * checks our examples, not whatever a registry published this morning. A native module (the
 * better-sqlite3 addon) is copied from the repository's install of the same version instead of
 * being compiled a second time.
 */
import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { mikroOrmMissing } from '../support/mikro-orm.js';
import { nodeSqliteMissing } from '../support/node-sqlite.js';
import { scratchDatabaseFor } from '../support/scratch-database.js';
import {
  allDocs,
  embeddedExamples,
  installedPackages,
  packagesImportedBy,
  readDoc,
  root,
} from '../support/guides.js';

const run = promisify(execFile);

/** What each example prints when it worked (its exit status is checked too). */
const expectedOutput: Array<[RegExp, RegExp]> = [
  [/^examples\/quick-start\.ts$/, /delivered \{ orderId: 42 \}/],
  [/^examples\/inbox\.ts$/, /charges for order 42: 1/],
  [/^examples\/inbox-order\.ts$/, /status of order 1: shipped/],
  [
    /^examples\/inbox-store\.ts$/,
    /already stored, skipped[\s\S]*order 1 shipped steps: placed, paid, packed/,
  ],
  // Each step once, though the first webhook was sent twice.
  [/^examples\/receivers\/webhook\.ts$/, /3 requests, order 1 steps: placed, paid/],
  [
    /^examples\/receivers\/(kafka|sqs|rabbitmq|nats|redis-streams|bullmq|pg-boss)\.ts$/,
    /already handled[\s\S]*order 1 shipped steps: placed, paid/,
  ],
  [/^examples\/ordering\.ts$/, /strict, in the end: order:1 placed/],
  [/^examples\/adapters\//, /"type": "OrderPlaced"/],
  // Both messages of order 1, in order, as the broker's consumer saw them.
  [/^examples\/relays\//, /order:1 #\d+ \S*placed\S* [\s\S]*order:1 #\d+ \S*paid/i],
  [/^examples\/operations\/prometheus\.ts$/, /outboxer_/],
  [/^examples\/operations\/runbook\.ts$/, /dead after/],
  [/^examples\/operations\/opentelemetry\.ts$/, /traceparent/],
  [/^examples\/dashboard\//, /GET \S+: 200 text\/html/],
  [/\.test\.ts$/, /passed/],
];

/** A word of an install line that names a package this repository has installed (and so tests). */
function isTestedPackage(word: string): boolean {
  return (
    /^(@[a-z0-9-]+\/)?[a-z0-9][a-z0-9._-]*$/.test(word) &&
    existsSync(join(root, 'node_modules', word, 'package.json'))
  );
}

function versionOf(name: string): string {
  return (
    JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }
  ).version;
}

interface Guide {
  doc: string;
  /**
   * The guide's folder, beside the scratch app rather than inside it: Node and TypeScript look for
   * packages in every parent folder's node_modules, and the app's holds every guide's packages.
   */
  dir: string;
  /** What its install lines name (outboxer included), and @types/node, which every TypeScript project has. */
  packages: string[];
  /** Repository paths of the files it embeds. */
  files: string[];
}

const work = mkdtempSync(join(tmpdir(), 'outboxer-packed-'));
const app = join(work, 'app');

const guides: Guide[] = allDocs()
  .map((doc) => ({ doc, text: readDoc(doc) }))
  .filter(({ text }) => embeddedExamples(text).length > 0)
  .map(({ doc, text }) => {
    const named = [...installedPackages(text, isTestedPackage)].filter(
      (name) => name === 'outboxer' || isTestedPackage(name),
    );
    return {
      doc,
      dir: join(work, 'guides', doc.replace(/\.md$/, '').replace(/[/.]/g, '-')),
      packages: [...new Set(['outboxer', '@types/node', ...named])],
      files: embeddedExamples(text).map(({ path }) => path),
    };
  });

const examples = guides.flatMap((guide) =>
  guide.files.filter((file) => file.endsWith('.ts')).map((file) => ({ guide, file })),
);

async function npm(args: string[], cwd: string): Promise<void> {
  await run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, maxBuffer: 64 << 20 });
}

/** Builds the package into a staging folder (the repository's dist/ is left alone) and packs it. */
async function pack(): Promise<string> {
  const staging = join(work, 'package');
  mkdirSync(staging);
  for (const file of ['package.json', 'README.md', 'CHANGELOG.md'])
    cpSync(join(root, file), join(staging, file));
  await run(
    process.execPath,
    [join(root, 'node_modules/tsup/dist/cli-default.js'), '--out-dir', join(staging, 'dist')],
    {
      cwd: root,
      maxBuffer: 64 << 20,
    },
  );
  const { stdout } = await run('npm', ['pack', '--pack-destination', work, '--silent'], { cwd: staging });
  return join(work, stdout.trim().split('\n').pop()!);
}

/** The scratch app: the tarball and every package some guide names, then one folder per guide. */
async function install(tarball: string): Promise<void> {
  mkdirSync(app);
  // The repository's overrides too: what a user of the same libraries does (TypeORM 1.1 still
  // declares better-sqlite3 ^12 and ioredis ^5 as peers, which the current lines do not satisfy).
  // A `$name` reference names the version installed here (the scratch app declares no dependencies).
  const overrides = JSON.parse(
    JSON.stringify(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).overrides ?? {}),
    (_key, value: unknown) =>
      typeof value === 'string' && value.startsWith('$') ? versionOf(value.slice(1)) : value,
  ) as unknown;
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({ name: 'scratch-app', private: true, type: 'module', overrides }),
  );
  const named = [...new Set(guides.flatMap((guide) => guide.packages))].filter((name) => name !== 'outboxer');
  // --ignore-scripts: the one native addon is copied below; nothing else needs its install script.
  await npm(
    ['install', '--ignore-scripts', '--prefer-offline', tarball, ...named.map((n) => `${n}@${versionOf(n)}`)],
    app,
  );
  // better-sqlite3 13 loads the prebuilt binary in its package; an older line needs the one built here.
  if (named.includes('better-sqlite3') && existsSync(join(root, 'node_modules/better-sqlite3/build'))) {
    cpSync(join(root, 'node_modules/better-sqlite3/build'), join(app, 'node_modules/better-sqlite3/build'), {
      recursive: true,
    });
  }
  for (const guide of guides) {
    // A user's app: outboxer is ESM only, and the examples use top-level await.
    mkdirSync(guide.dir, { recursive: true });
    writeFileSync(join(guide.dir, 'package.json'), JSON.stringify({ private: true, type: 'module' }));
    for (const name of guide.packages) {
      mkdirSync(dirname(join(guide.dir, 'node_modules', name)), { recursive: true });
      symlinkSync(join(app, 'node_modules', name), join(guide.dir, 'node_modules', name), 'dir');
    }
    for (const file of guide.files) cpSync(join(root, file), join(guide.dir, file));
    for (const schema of guide.files.filter((file) => file.endsWith('.prisma'))) {
      await run(
        process.execPath,
        [join(guide.dir, 'node_modules/prisma/build/index.js'), 'generate', '--schema', schema],
        {
          cwd: guide.dir,
          env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.execPath, CHECKPOINT_DISABLE: '1' },
        },
      );
    }
  }
}

beforeAll(async () => {
  await install(await pack());
}, 600_000);

// The scratch app holds a few hundred packages: removing them takes a while on a busy disk.
afterAll(() => rm(work, { recursive: true, force: true }), 300_000);

test('the guides embed examples, and each names outboxer among what it installs', () => {
  expect(examples.length).toBeGreaterThanOrEqual(20);
  for (const guide of guides) expect(guide.packages, guide.doc).toContain('outboxer');
});

test('every guide example type-checks against the packed package, strict', async () => {
  writeFileSync(
    join(work, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noUncheckedIndexedAccess: true,
        exactOptionalPropertyTypes: true,
        verbatimModuleSyntax: true,
        skipLibCheck: true,
        noEmit: true,
        // @types/node from the app, as every TypeScript project for Node has it; nothing else.
        typeRoots: ['./app/node_modules/@types'],
        types: ['node'],
      },
      include: ['guides/**/*.ts'],
    }),
  );
  const typecheck = run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', work], {
    cwd: work,
    maxBuffer: 64 << 20,
  });
  await expect(
    typecheck.catch((error: { stdout?: string }) => Promise.reject(new Error(error.stdout))),
  ).resolves.toBeDefined();
}, 300_000);

describe.each(examples)('$file ($guide.doc)', ({ guide, file }) => {
  // node:sqlite's example needs the Node that has it (22.16+), MikroORM's the Node its engines
  // field names (22.17+); CI runs this file on 24 and 22.
  const needsNodeSqlite = file.includes('node-sqlite') && nodeSqliteMissing !== undefined;
  const needsMikroOrm = file.includes('mikro-orm') && mikroOrmMissing !== undefined;
  test.skipIf(needsNodeSqlite || needsMikroOrm)(
    'runs as written with only what the guide installs',
    async () => {
      const imported = packagesImportedBy(readFileSync(join(root, file), 'utf8'));
      expect(
        [...imported].filter((name) => !guide.packages.includes(name)),
        'imported, not installed',
      ).toEqual([]);

      // A MySQL example (`kysely-mysql.ts`, `prisma/mysql/example.ts`) gets a MariaDB database of its
      // own, every other a Postgres one.
      await scratchDatabaseFor(file)(async (url) => {
        const command = file.endsWith('.test.ts')
          ? [join(guide.dir, 'node_modules/vitest/vitest.mjs'), 'run', file]
          : [join(root, 'node_modules/tsx/dist/cli.mjs'), file];
        const { stdout } = await run(process.execPath, command, {
          cwd: guide.dir,
          env: { ...process.env, DATABASE_URL: url, NODE_OPTIONS: '' },
          timeout: 180_000,
          maxBuffer: 64 << 20,
        });
        const [, expected] = expectedOutput.find(([path]) => path.test(file)) ?? [];
        expect(expected, `an expected output for ${file}`).toBeDefined();
        expect(stdout).toMatch(expected!);
      });
    },
    240_000,
  );
});
