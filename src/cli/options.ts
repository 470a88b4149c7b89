import { parseArgs } from 'node:util';
import { isOutboxerError } from '../core/errors.js';
import { parseTableName } from '../core/identifiers.js';
import { MAX_LIST_LIMIT } from '../core/limits.js';
import { MAX_KEEP_SECONDS } from '../core/options.js';
import { UsageError } from './usage-error.js';

export const COMMANDS = [
  'migrate',
  'sql',
  'counts',
  'pending',
  'blocked',
  'dead',
  'retry-dead',
  'discard',
  'prune',
  'dashboard',
] as const;

export type Command = (typeof COMMANDS)[number];

/** The command line, checked. */
export interface CliOptions {
  readonly command: Command | 'help' | 'version';
  readonly url: string | undefined;
  readonly table: string;
  readonly schema: string | undefined;
  readonly outbox: string | undefined;
  readonly partitions: number | undefined;
  /** The outbox's onDead; `auto` infers it from the table (see docs/cli.md). */
  readonly onDead: 'auto' | 'continue' | 'park';
  readonly json: boolean;
  readonly yes: boolean;
  readonly limit: number;
  /** `discard --dead`: every dead message. */
  readonly dead: boolean;
  /** `prune --older-than`, in seconds. */
  readonly olderThan: number | undefined;
  /** `counts --up-to`: count each figure only up to this many. */
  readonly upTo: number | undefined;
  readonly dialect: 'postgres' | 'sqlite' | undefined;
  /** Message ids given as arguments (`retry-dead 12 13`, `discard 12,13`). */
  readonly ids: number[];
  /** `dashboard`: where it listens, whether it allows changes, and its path prefix. */
  readonly port: number;
  readonly host: string;
  readonly allowMutations: boolean;
  readonly basePath: string | undefined;
}

export const USAGE = `Usage: outboxer <command> [options]

Operate outboxer's tables from a shell. The database comes from DATABASE_URL (or --url):
a postgres:// URL, or sqlite:<path> (e.g. sqlite:./app.db).

Commands:
  migrate                  create the tables and indexes (idempotent)
  sql                      print the DDL that migrate runs (--dialect postgres|sqlite)
  counts                   pending, delivered, dead and orphaned messages per outbox
  pending                  messages waiting for delivery, oldest first
  blocked                  groups held back by a failing (or parked) head message
  dead                     dead messages, oldest first
  retry-dead [ids...]      make dead messages pending again (all, or these ids)
  discard <ids...>         remove messages for good; --dead: every dead message
  prune --older-than <d>   delete delivered messages older than d (retention: { keep })
  dashboard                serve the web dashboard (read-only unless --allow-mutations)

Options:
  --outbox <name>          the outbox (default: the only one recorded in <table>_config;
                           counts shows every recorded outbox)
  --table <name>           the message table, name or schema.name (default outboxer_messages)
  --schema <name>          the schema of the table (default: the search path; SQLite: main)
  --partitions <n>         partitions of an outbox not recorded in <table>_config
  --on-dead <mode>         the outbox's onDead: park, continue, or auto (default), which
                           finds park from messages held behind a dead one
  --limit <n>              rows shown by pending, dead and blocked (default 100)
  --older-than <duration>  prune: 30s, 15m, 12h, 7d or seconds; 0 prunes every delivered message
  --up-to <n>              counts: cap each figure at n (SQLite: flat cost on a deep backlog)
  --dead                   discard: every dead message
  --port <n>               dashboard: the port (default 8080; 0 picks a free one)
  --host <address>         dashboard: the address to listen on (default 127.0.0.1)
  --allow-mutations        dashboard: allow retry, redrive and discard from the page
  --base-path <path>       dashboard: serve it under this path (default /)
  --json                   machine-readable output on stdout
  -y, --yes                do not ask for confirmation (needed without a terminal)
  --url <url>              instead of DATABASE_URL (visible to other users in the process list);
                           --database-url is the same
  -h, --help               this help
  -v, --version            the version

retry-dead, discard and prune ask for confirmation, work in batches (1,000 ids, or the pruner's
batches) and report progress on stderr. Exit codes: 0 done, 1 failed or declined, 2 bad usage.
`;

/** Parses the command line (without `node` and the script). */
export function parseCommandLine(argv: readonly string[]): CliOptions {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nRun outboxer --help for the options.`);
  }
  const { values, positionals } = parsed;
  const [first, ...rest] = positionals;
  const command = values.help
    ? 'help'
    : values.version
      ? 'version'
      : first === 'help'
        ? 'help'
        : checkCommand(first);

  const takesIds = command === 'retry-dead' || command === 'discard';
  if (!takesIds && rest.length > 0) {
    throw new UsageError(`${command} takes no arguments; got ${JSON.stringify(rest.join(' '))}.`);
  }
  const ids = takesIds ? parseIds(rest) : [];
  if (values.dead && command !== 'discard') throw new UsageError('--dead belongs to discard.');
  if (command === 'discard' && values.dead && ids.length > 0) {
    throw new UsageError('discard takes message ids or --dead, not both.');
  }
  if (command === 'discard' && !values.dead && ids.length === 0) {
    throw new UsageError(
      'discard needs message ids (outboxer discard 4711 4712), or --dead for every dead message.',
    );
  }
  if (values['up-to'] !== undefined && command !== 'counts')
    throw new UsageError('--up-to belongs to counts.');
  if (values['older-than'] !== undefined && command !== 'prune') {
    throw new UsageError('--older-than belongs to prune.');
  }
  if (command === 'prune' && values['older-than'] === undefined) {
    throw new UsageError(
      'prune needs --older-than <duration>, the retention window: e.g. --older-than 7d (0 deletes every delivered message).',
    );
  }
  const dashboard = command === 'dashboard';
  for (const flag of ['port', 'host', 'allow-mutations', 'base-path'] as const) {
    if (values[flag] !== undefined && !dashboard) throw new UsageError(`--${flag} belongs to dashboard.`);
  }
  if (values.url !== undefined && values['database-url'] !== undefined) {
    throw new UsageError('--url and --database-url are the same option: give one.');
  }
  const table = values.table ?? 'outboxer_messages';
  checkTableName(table, values.schema);
  return {
    command,
    url: values.url ?? values['database-url'],
    table,
    schema: values.schema,
    outbox: values.outbox,
    partitions:
      values.partitions === undefined ? undefined : positiveInteger('--partitions', values.partitions, 1024),
    onDead: onDead(values['on-dead']),
    json: values.json ?? false,
    yes: values.yes ?? false,
    limit: values.limit === undefined ? 100 : positiveInteger('--limit', values.limit, MAX_LIST_LIMIT),
    dead: values.dead ?? false,
    olderThan: values['older-than'] === undefined ? undefined : parseDuration(values['older-than']),
    upTo:
      values['up-to'] === undefined ? undefined : positiveInteger('--up-to', values['up-to'], 1_000_000_000),
    dialect: dialect(values.dialect),
    ids,
    port: values.port === undefined ? 8080 : port(values.port),
    host: values.host === undefined ? '127.0.0.1' : host(values.host),
    allowMutations: values['allow-mutations'] ?? false,
    basePath: values['base-path'],
  };
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      url: { type: 'string' },
      'database-url': { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      'allow-mutations': { type: 'boolean' },
      'base-path': { type: 'string' },
      table: { type: 'string' },
      schema: { type: 'string' },
      outbox: { type: 'string' },
      partitions: { type: 'string' },
      'on-dead': { type: 'string' },
      limit: { type: 'string' },
      'older-than': { type: 'string' },
      'up-to': { type: 'string' },
      dialect: { type: 'string' },
      dead: { type: 'boolean' },
      json: { type: 'boolean' },
      yes: { type: 'boolean', short: 'y' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'v' },
    },
  });
}

function checkCommand(name: string | undefined): Command {
  if (name === undefined) throw new UsageError(`Which command?\n\n${USAGE}`);
  if ((COMMANDS as readonly string[]).includes(name)) return name as Command;
  throw new UsageError(
    `Unknown command ${JSON.stringify(name)}. Commands: ${COMMANDS.join(', ')}. Run outboxer --help.`,
  );
}

/** `--table` and `--schema` become SQL identifiers: refused here, before any connection, unless plain. */
function checkTableName(table: string, schema: string | undefined): void {
  try {
    parseTableName(table, '--table', schema, '--schema');
  } catch (error) {
    if (isOutboxerError(error)) throw new UsageError(error.message);
    throw error;
  }
}

function positiveInteger(option: string, text: string, max: number): number {
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > max) {
    throw new UsageError(`${option} must be an integer from 1 to ${max}; got ${JSON.stringify(text)}.`);
  }
  return Number(text);
}

/** Ids as separate arguments or comma-separated: `12 13`, `12,13`. */
function parseIds(args: readonly string[]): number[] {
  const ids = args.flatMap((arg) => arg.split(',')).filter((part) => part !== '');
  for (const id of ids) {
    if (!/^\d+$/.test(id) || !Number.isSafeInteger(Number(id)) || Number(id) < 1) {
      throw new UsageError(`Message ids are positive integers; got ${JSON.stringify(id)}.`);
    }
  }
  return [...new Set(ids.map(Number))];
}

const UNITS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400 };

/** `30s`, `15m`, `12h`, `7d`, `500ms` or plain seconds, to seconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim());
  if (match === null) {
    throw new UsageError(
      `--older-than must be a duration such as 30s, 15m, 12h or 7d; got ${JSON.stringify(text)}.`,
    );
  }
  const seconds = Number(match[1]) * UNITS[match[2] ?? 's']!;
  if (seconds > MAX_KEEP_SECONDS) {
    throw new UsageError(
      `--older-than must be at most ${MAX_KEEP_SECONDS} seconds (100 years); got ${JSON.stringify(text)}.`,
    );
  }
  return seconds;
}

function onDead(value: string | undefined): 'auto' | 'continue' | 'park' {
  if (value === undefined) return 'auto';
  if (value === 'auto' || value === 'continue' || value === 'park') return value;
  throw new UsageError(`--on-dead must be auto, continue or park; got ${JSON.stringify(value)}.`);
}

function dialect(value: string | undefined): 'postgres' | 'sqlite' | undefined {
  if (value === undefined || value === 'postgres' || value === 'sqlite') return value;
  throw new UsageError(`--dialect must be postgres or sqlite; got ${JSON.stringify(value)}.`);
}

function port(text: string): number {
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65_535) {
    throw new UsageError(`--port must be an integer from 0 to 65535; got ${JSON.stringify(text)}.`);
  }
  return Number(text);
}

/** An IP address or a host name, nothing a shell or a URL could read otherwise. */
function host(text: string): string {
  if (!/^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|[0-9A-Fa-f:.]{2,45})$/.test(text)) {
    throw new UsageError(
      `--host must be an IP address or a host name such as 127.0.0.1, 0.0.0.0 or ::1; got ${JSON.stringify(text)}.`,
    );
  }
  return text;
}
