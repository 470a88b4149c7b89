/**
 * Generates the Prisma client of schema.prisma into ./generated, or of mysql/schema.prisma into
 * mysql/generated, and for Prisma 6 of v6/schema.prisma and v6/mysql/schema.prisma (once per
 * Prisma version and schema; concurrent test files agree through an atomic rename) and loads it.
 * generatePrismaClient takes another schema too: examples.test.ts generates the client of
 * examples/adapters/prisma/schema.prisma into the `output` that schema names.
 *
 * Offline: `prisma generate` wants the schema-engine binary from binaries.prisma.sh before it
 * generates anything, but does not run it. PRISMA_SCHEMA_ENGINE_BINARY pointing at any existing
 * file (the node binary here) skips the download. Prisma 6 also wants its Rust query-engine
 * library, which a client generated with engineType = "client" never loads:
 * PRISMA_QUERY_ENGINE_LIBRARY pointing at an existing file skips that download too. Nothing else is
 * needed: the client runs on the WebAssembly query compiler shipped in @prisma/client and a driver
 * adapter.
 *
 * Prisma 6 is installed beside 7 under npm aliases (prisma-v6, prisma-client-v6). A generated
 * client imports its runtime as `@prisma/client/runtime/…`, which resolves to Prisma 7's: the
 * Prisma 6 client's imports are rewritten to `prisma-client-v6/runtime/…` after generating.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const testSchema = join(here, 'schema.prisma');

/** The Prisma majors the tests run: 7 under its own names, 6 under npm aliases. */
export type PrismaLine = 6 | 7;

/** Per line: the package of its CLI, the name its client runtime is installed under, its schemas. */
const lines = {
  7: {
    cli: 'prisma',
    runtime: '@prisma/client',
    schemas: { postgresql: testSchema, mysql: join(here, 'mysql', 'schema.prisma') },
  },
  6: {
    cli: 'prisma-v6',
    runtime: 'prisma-client-v6',
    schemas: {
      postgresql: join(here, 'v6', 'schema.prisma'),
      mysql: join(here, 'v6', 'mysql', 'schema.prisma'),
    },
  },
} as const;

/** The generated client of the test schema, as far as the adapter tests use it. */
export interface GeneratedPrisma {
  PrismaClient: new (options: { adapter: unknown }) => GeneratedPrismaClient;
}

export interface GeneratedPrismaClient {
  $queryRawUnsafe(query: string, ...values: unknown[]): Promise<unknown>;
  $executeRawUnsafe(query: string, ...values: unknown[]): Promise<number>;
  $transaction<T>(
    fn: (tx: GeneratedPrismaTransaction) => Promise<T>,
    options?: { maxWait?: number; timeout?: number },
  ): Promise<T>;
  $connect(): Promise<void>;
  $disconnect(): Promise<void>;
  order: GeneratedPrismaTransaction['order'];
}

export interface GeneratedPrismaTransaction {
  $queryRawUnsafe(query: string, ...values: unknown[]): Promise<unknown>;
  $executeRawUnsafe(query: string, ...values: unknown[]): Promise<number>;
  order: {
    create(args: {
      data: { customer: string; total: number };
    }): Promise<{ id: number; customer: string; total: number }>;
    count(): Promise<number>;
  };
}

function stamp(cli: string, schemaText: string): string {
  const require = createRequire(import.meta.url);
  const version = (require(`${cli}/package.json`) as { version: string }).version;
  return createHash('sha256').update(version).update(schemaText).digest('hex');
}

const outputLine = /(output\s*=\s*)"([^"]+)"/;

/**
 * Runs `prisma generate` (of Prisma `line`) for the schema at `schemaPath` unless the folder its
 * generator's `output` names already holds the client of this schema and Prisma version. Returns
 * that folder.
 */
export function generatePrismaClient(schemaPath: string = testSchema, line: PrismaLine = 7): string {
  const { cli: cliPackage, runtime } = lines[line];
  const schemaText = readFileSync(schemaPath, 'utf8');
  const declared = outputLine.exec(schemaText)?.[2];
  if (declared === undefined) throw new Error(`${schemaPath}: its generator names no output`);
  const schemaDir = dirname(schemaPath);
  const output = resolve(schemaDir, declared);
  const expected = stamp(cliPackage, schemaText);
  const stampFile = join(output, '.stamp');
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === expected) return output;

  // Generate next to the schema under a private name, then move it into place in one rename.
  const unique = `${process.pid}.${Date.now()}`;
  const temporary = `${output}.${unique}`;
  const temporarySchema = join(schemaDir, `schema.${unique}.prisma`);
  writeFileSync(
    temporarySchema,
    schemaText.replace(outputLine, (_, head: string) => `${head}"${relative(schemaDir, temporary)}"`),
  );
  try {
    const cli = createRequire(import.meta.url).resolve(`${cliPackage}/build/index.js`);
    execFileSync(process.execPath, [cli, 'generate', '--schema', temporarySchema], {
      env: {
        ...process.env,
        PRISMA_SCHEMA_ENGINE_BINARY: process.execPath,
        PRISMA_QUERY_ENGINE_LIBRARY: process.execPath,
        CHECKPOINT_DISABLE: '1',
        PRISMA_HIDE_UPDATE_MESSAGE: '1',
      },
      stdio: 'pipe',
    });
    if (runtime !== '@prisma/client') importRuntimeAs(temporary, runtime);
    writeFileSync(join(temporary, '.stamp'), expected);
    // Another test file may have finished first: keep its client, which is the same.
    if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === expected) return output;
    if (existsSync(output)) rmSync(output, { recursive: true, force: true });
    mkdirSync(dirname(output), { recursive: true });
    try {
      renameSync(temporary, output);
    } catch (error) {
      // Another test file generated the same client meanwhile: use theirs.
      if (!existsSync(stampFile)) throw error;
    }
    return output;
  } finally {
    rmSync(temporarySchema, { force: true });
    rmSync(temporary, { recursive: true, force: true });
  }
}

/** Points the imports of the generated client at `runtime/…` of the package installed as `name`. */
function importRuntimeAs(folder: string, name: string): void {
  for (const entry of readdirSync(folder, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !/\.m?ts$/.test(entry.name)) continue;
    const path = join(entry.parentPath, entry.name);
    const text = readFileSync(path, 'utf8');
    const rewritten = text.replaceAll('"@prisma/client/runtime/', `"${name}/runtime/`);
    if (rewritten !== text) writeFileSync(path, rewritten);
  }
}

export async function loadPrismaClient(
  provider: 'postgresql' | 'mysql' = 'postgresql',
  line: PrismaLine = 7,
): Promise<GeneratedPrisma> {
  const output = generatePrismaClient(lines[line].schemas[provider], line);
  // A computed specifier: the generated code does not exist before the first test run, and the
  // typecheck must not depend on it.
  const url = pathToFileURL(join(output, 'client.mts')).href;
  return (await import(/* @vite-ignore */ url)) as GeneratedPrisma;
}
