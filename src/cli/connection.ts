/**
 * The database the CLI talks to, from `DATABASE_URL` (or `--url`): a Postgres URL through `pg`, or
 * `sqlite:<path>` through `better-sqlite3`. Both drivers are optional peer dependencies, loaded
 * only when used. The URL itself is never printed, and its secrets are scrubbed from every message.
 */
import { resolve } from 'node:path';
import type { DatabaseAdapter } from '../core/database.js';
import { redactCredentials } from '../core/errors.js';
import { CliError, UsageError } from './usage-error.js';

export type DatabaseTarget =
  | { readonly kind: 'postgres'; readonly url: string; readonly secrets: readonly string[] }
  | { readonly kind: 'sqlite'; readonly path: string; readonly secrets: readonly string[] };

const NOT_SHOWN = '(the value is not shown: it may hold a password)';

/**
 * Reads a database URL:
 * - `postgres://user:password@host:5432/db?sslmode=require` (or `postgresql://`): any URL `pg` accepts;
 * - `sqlite:<path>`: a file, relative to the working directory (`sqlite:./app.db`) or absolute
 *   (`sqlite:/var/lib/app/app.db`, `sqlite:///var/lib/app/app.db`).
 */
export function parseDatabaseUrl(raw: string | undefined): DatabaseTarget {
  if (raw === undefined || raw.trim() === '') {
    throw new UsageError(
      'Set DATABASE_URL (or pass --url) to a postgres:// URL or to sqlite:<path>, e.g. DATABASE_URL=sqlite:./app.db.',
    );
  }
  const value = raw.trim();
  if (/^sqlite:/i.test(value)) {
    let path = value.slice('sqlite:'.length);
    if (path.startsWith('//')) path = path.slice(2); // sqlite:///abs/path → /abs/path
    if (path === '' || path.includes('?')) {
      throw new UsageError(
        `DATABASE_URL must be sqlite:<path to a file>, e.g. sqlite:./app.db ${NOT_SHOWN}.`,
      );
    }
    return { kind: 'sqlite', path: resolve(decodeURIComponent(path)), secrets: [] };
  }
  if (/^postgres(ql)?:\/\//i.test(value)) {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new UsageError(`DATABASE_URL is not a valid postgres:// URL ${NOT_SHOWN}.`);
    }
    return { kind: 'postgres', url: value, secrets: secretsOf(url, value) };
  }
  // Not even the scheme is shown: in "admin:secret@host/db" the "scheme" is the user name.
  throw new UsageError(
    `DATABASE_URL must be a postgres:// or postgresql:// URL, or sqlite:<path> ${NOT_SHOWN}.`,
  );
}

/** What must never appear in output: the password, secret-looking query values, the URL itself. */
function secretsOf(url: URL, raw: string): string[] {
  const secrets = [raw];
  if (url.password !== '') secrets.push(url.password, safeDecode(url.password));
  for (const [key, value] of url.searchParams) {
    if (/pass|secret|token|key/i.test(key) && value !== '') secrets.push(value, encodeURIComponent(value));
  }
  // Short values would mangle every message ("a" as a password); they are unlikely to be real.
  return [...new Set(secrets)].filter((secret) => secret.length >= 3).sort((a, b) => b.length - a.length);
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** Removes the target's secrets (and any `scheme://user:password@`) from text meant for output. */
export function scrub(text: string, secrets: readonly string[]): string {
  let clean = text;
  for (const secret of secrets) clean = clean.split(secret).join('***');
  return redactCredentials(clean);
}

/** An open database: the adapter for an `Outboxer`, and how to close it. */
export interface OpenDatabase {
  readonly adapter: DatabaseAdapter<never, boolean>;
  close(): Promise<void>;
}

interface PgPool {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
  connect(): Promise<{
    query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
    release(error?: Error | boolean): void;
  }>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  end(): Promise<void>;
}

interface SqliteDatabase {
  close(): void;
}

/**
 * Connects. For SQLite, the file must exist unless `create` is set (`migrate`): a typo in the path
 * must not create an empty database.
 */
export async function openDatabase(
  target: DatabaseTarget,
  options: { create: boolean },
): Promise<OpenDatabase> {
  if (target.kind === 'postgres') {
    const pg = (await importDriver('pg', 'a Postgres DATABASE_URL')) as {
      default: { Pool: new (config: object) => PgPool };
    };
    const { nodePostgres } = await import('../adapters/pg/node-postgres.js');
    const pool = new pg.default.Pool({
      connectionString: target.url,
      max: 2,
      application_name: 'outboxer-cli',
      connectionTimeoutMillis: 10_000,
    });
    pool.on('error', () => undefined); // an idle client's error surfaces on the next query
    return {
      adapter: nodePostgres(pool) as unknown as DatabaseAdapter<never, boolean>,
      close: () => pool.end(),
    };
  }
  const sqlite = (await importDriver('better-sqlite3', 'a sqlite: DATABASE_URL')) as {
    default: new (path: string, options: object) => SqliteDatabase;
  };
  const { betterSqlite3 } = await import('../adapters/better-sqlite3/better-sqlite3.js');
  let db: SqliteDatabase;
  try {
    db = new sqlite.default(target.path, { fileMustExist: !options.create, timeout: 10_000 });
  } catch (error) {
    if ((error as { code?: unknown }).code === 'SQLITE_CANTOPEN') {
      throw new CliError(
        `No SQLite database at ${target.path}${options.create ? '' : ' (only migrate creates one)'}.`,
      );
    }
    throw error;
  }
  return {
    adapter: betterSqlite3(db as never) as unknown as DatabaseAdapter<never, boolean>,
    close: async () => db.close(),
  };
}

async function importDriver(name: string, what: string): Promise<unknown> {
  try {
    return await import(name);
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ERR_MODULE_NOT_FOUND') {
      throw new CliError(`${what} needs the ${name} package: npm install ${name}`);
    }
    throw error;
  }
}
