/** The CLI without the process: arguments and streams in, an exit code out. */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isOutboxerError } from '../core/errors.js';
import { postgresSchemaSql } from '../dialects/postgres/schema-sql.js';
import { sqliteSchemaSql } from '../dialects/sqlite/schema-sql.js';
import { openDatabase, parseDatabaseUrl, scrub } from './connection.js';
import { dashboardCommand } from './dashboard-command.js';
import { parseCommandLine, USAGE, type CliOptions, type Command } from './options.js';
import { blockedCommand, countsCommand, deadCommand, pendingCommand } from './read-commands.js';
import { CliSession } from './session.js';
import type { CliIo } from './terminal.js';
import { CliError } from './usage-error.js';
import { discardCommand, migrateCommand, pruneCommand, retryDeadCommand } from './write-commands.js';

type DatabaseCommand = Exclude<Command, 'sql'>;

const DATABASE_COMMANDS: Record<DatabaseCommand, (session: CliSession, io: CliIo) => Promise<void>> = {
  migrate: migrateCommand,
  counts: countsCommand,
  pending: pendingCommand,
  blocked: blockedCommand,
  dead: deadCommand,
  'retry-dead': retryDeadCommand,
  discard: discardCommand,
  prune: pruneCommand,
  dashboard: dashboardCommand,
};

/**
 * Runs `outboxer <argv>` and returns the exit code: 0 done, 1 failed or declined, 2 bad usage.
 * Errors are written to stderr without the database URL or its secrets.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let secrets: readonly string[] = [];
  try {
    const options = parseCommandLine(argv);
    if (options.command === 'help') {
      io.stdout.write(USAGE);
      return 0;
    }
    if (options.command === 'version') {
      io.stdout.write(`${version()}\n`);
      return 0;
    }
    const url = options.url ?? io.env.DATABASE_URL;
    if (options.command === 'sql') {
      io.stdout.write(schemaSql(options, url));
      return 0;
    }
    const target = parseDatabaseUrl(url);
    secrets = target.secrets;
    const database = await openDatabase(target, { create: options.command === 'migrate' });
    try {
      const session = new CliSession(options, database);
      try {
        await DATABASE_COMMANDS[options.command](session, io);
      } catch (error) {
        throw session.explain(error);
      }
    } finally {
      await database.close().catch(() => undefined);
    }
    return 0;
  } catch (error) {
    io.stderr.write(`outboxer: ${scrub(describe(error), secrets)}\n`);
    return exitCode(error);
  }
}

/** The DDL for `--dialect`, or for the dialect of the database URL, or Postgres. */
function schemaSql(options: CliOptions, url: string | undefined): string {
  const dialect =
    options.dialect ?? (url === undefined || url === '' ? 'postgres' : parseDatabaseUrl(url).kind);
  const table = { table: options.table, ...(options.schema === undefined ? {} : { schema: options.schema }) };
  return dialect === 'sqlite' ? sqliteSchemaSql(table) : postgresSchemaSql(table);
}

function describe(error: unknown): string {
  if (error instanceof CliError) return error.message;
  if (isOutboxerError(error)) return `${error.message} [${error.code}]`;
  if (error instanceof AggregateError && error.errors.length > 0) {
    // pg reports a failed connection to a name with several addresses as one AggregateError.
    return `could not connect to the database: ${[...new Set(error.errors.map((e) => describe(e)))].join('; ')}`;
  }
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    const text = error.message || String(code ?? error.name);
    if (typeof code === 'string' && /^E[A-Z]+$/.test(code))
      return `could not connect to the database: ${text}`;
    return text;
  }
  return String(error);
}

function exitCode(error: unknown): number {
  if (error instanceof CliError) return error.exitCode;
  if (isOutboxerError(error) && (error.code === 'INVALID_OPTIONS' || error.code === 'INVALID_IDENTIFIER'))
    return 2;
  return 1;
}

/** The version in outboxer's package.json, found from this file in src/cli or dist/…. */
function version(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i += 1) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'outboxer') return pkg.version ?? 'unknown';
    }
    dir = dirname(dir);
  }
  return 'unknown';
}
