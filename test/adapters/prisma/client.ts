/**
 * Generates the Prisma client of schema.prisma into ./generated, or of mysql/schema.prisma into
 * mysql/generated (once per Prisma version and schema; concurrent test files agree through an
 * atomic rename) and loads it. generatePrismaClient
 * takes another schema too: examples.test.ts generates the client of
 * examples/adapters/prisma/schema.prisma into the `output` that schema names.
 *
 * Offline: `prisma generate` wants the schema-engine binary from binaries.prisma.sh before it
 * generates anything, but does not run it. PRISMA_SCHEMA_ENGINE_BINARY pointing at any existing
 * file (the node binary here) skips the download. Nothing else is needed: the client runs on
 * the WebAssembly query compiler shipped in @prisma/client and the pg driver adapter.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const testSchema = join(here, 'schema.prisma');
/** The test schemas by provider: Postgres here, MySQL (MariaDB's driver adapter) in ./mysql. */
const testSchemas = { postgresql: testSchema, mysql: join(here, 'mysql', 'schema.prisma') };

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

function stamp(schemaText: string): string {
  const require = createRequire(import.meta.url);
  const version = (require('prisma/package.json') as { version: string }).version;
  return createHash('sha256').update(version).update(schemaText).digest('hex');
}

const outputLine = /(output\s*=\s*)"([^"]+)"/;

/**
 * Runs `prisma generate` for the schema at `schemaPath` unless the folder its generator's `output`
 * names already holds the client of this schema and Prisma version. Returns that folder.
 */
export function generatePrismaClient(schemaPath: string = testSchema): string {
  const schemaText = readFileSync(schemaPath, 'utf8');
  const declared = outputLine.exec(schemaText)?.[2];
  if (declared === undefined) throw new Error(`${schemaPath}: its generator names no output`);
  const schemaDir = dirname(schemaPath);
  const output = resolve(schemaDir, declared);
  const expected = stamp(schemaText);
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
    const cli = createRequire(import.meta.url).resolve('prisma/build/index.js');
    execFileSync(process.execPath, [cli, 'generate', '--schema', temporarySchema], {
      env: {
        ...process.env,
        PRISMA_SCHEMA_ENGINE_BINARY: process.execPath,
        CHECKPOINT_DISABLE: '1',
        PRISMA_HIDE_UPDATE_MESSAGE: '1',
      },
      stdio: 'pipe',
    });
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

export async function loadPrismaClient(
  provider: keyof typeof testSchemas = 'postgresql',
): Promise<GeneratedPrisma> {
  const output = generatePrismaClient(testSchemas[provider]);
  // A computed specifier: the generated code does not exist before the first test run, and the
  // typecheck must not depend on it.
  const url = pathToFileURL(join(output, 'client.mts')).href;
  return (await import(/* @vite-ignore */ url)) as GeneratedPrisma;
}
