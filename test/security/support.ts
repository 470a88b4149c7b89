/**
 * What the SQL-injection suite shares: hostile identifiers and values, a canary table (`victim`,
 * one row) that must survive, scratch databases, and the two statement logs that show what really
 * reached the database, below every library: on Postgres a proxy that reads the wire protocol
 * (wire-log.ts), on SQLite better-sqlite3's statements wrapped in this process (sqlite-log.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import Database from 'better-sqlite3';
import pg from 'pg';
import { expect } from 'vitest';
import { isOutboxerError, type ErrorCode } from 'outboxer';
import type { CliIo } from '../../src/cli/terminal.js';
import { DATABASE_URL } from '../support/databases.js';
import { logBetterSqlite3, type SqliteStatement } from './sqlite-log.js';
import { wireLog } from './wire-log.js';

export type { LoggedStatement } from './wire-log.js';

/** Names that must never become SQL; `victim` is the canary table of the schema under test. */
export function hostileIdentifiers(schema = 'public'): Array<[label: string, value: unknown]> {
  const strings = [
    'x"; DROP TABLE victim; --',
    `x"; DROP TABLE "${schema}"."victim"; --`,
    `${schema}"."victim`,
    'public"."victim',
    "x'); DROP TABLE victim; --",
    'a b',
    'a;b',
    "'",
    '"',
    '\\',
    '$1',
    '$$',
    '?',
    '--',
    '/*',
    'a\0b',
    '\0',
    'vіctim', // Cyrillic і
    'ｖｉｃｔｉｍ', // fullwidth
    '\u212Aelvin', // Kelvin sign, folds to K
    'vic\u200btim', // zero-width space
    'café',
    'victim\n',
    '1victim',
    'vic-tim',
    'a'.repeat(64),
    'a'.repeat(1000),
    '',
    'a.b.c',
    '.victim',
    'victim.',
  ];
  const others: Array<[string, unknown]> = [
    ['the number 42', 42],
    ['NaN', NaN],
    ['true', true],
    ['null', null],
    ['an object', {}],
    ['an array', ['victim']],
    ['a function', () => 'victim'],
    ['a symbol', Symbol('victim')],
    ['a String object', new String('victim')],
    ['an object whose toString is SQL', { toString: () => 'x"; DROP TABLE victim; --' }],
  ];
  return [...strings.map((s): [string, unknown] => [JSON.stringify(s).slice(0, 60), s]), ...others];
}

/** A BigInt name, which JSON.stringify cannot print: refused with INVALID_IDENTIFIER all the same. */
export const BIGINT_NAME = 1n;

/** Strings a caller may legitimately publish, each full of SQL syntax: they must travel as values. */
export const HOSTILE_VALUES = [
  "x'; DROP TABLE victim; --",
  "'); DROP TABLE victim; --",
  'x"; DROP TABLE victim; --',
  "' OR '1'='1",
  '$1',
  '$2::text',
  '?',
  '\\?',
  '??',
  '$$',
  '$tag$ DROP TABLE victim $tag$',
  '/*',
  '*/',
  '--',
  '\\',
  "E'\\x27'",
  '%_',
  ':name',
  '@p1',
  '{braces}',
  '"',
  "'",
  ';',
  'ü €, 𝄞',
] as const;

/** Asserts that `fn` throws (or rejects with) an OutboxerError with one of `codes`. */
export async function expectRefusal(
  fn: () => unknown,
  codes: readonly ErrorCode[],
  what: string,
): Promise<Error> {
  let error: unknown;
  try {
    await fn();
  } catch (thrown) {
    error = thrown;
  }
  expect(isOutboxerError(error), `${what}: expected an OutboxerError, got ${String(error)}`).toBe(true);
  expect(codes, `${what}: ${(error as Error).message}`).toContain((error as { code: ErrorCode }).code);
  return error as Error;
}

/** `$3` → `$n`: Knex and MikroORM renumber placeholders on their way to the server. */
export function normalize(text: string): string {
  return text.replace(/\$\d+/g, '$n').replace(/\s+/g, ' ').trim();
}

/**
 * The structure of a statement: every string literal (`'…'`, `E'…'`), number and placeholder
 * replaced by `?`. A library that writes values into the text (MikroORM) must leave this unchanged:
 * then every value sat inside a literal and changed nothing of the statement around it.
 */
export function skeleton(text: string): string {
  return text
    .replace(/\s*\b[Ee]'(?:[^'\\]|\\.|'')*'/g, ' ?') // pg's escapeLiteral writes ` E'…'`
    .replace(/'(?:[^']|'')*'/g, '?')
    .replace(/\$\d+/g, '?')
    .replace(/\b\d+\b/g, '?')
    .replace(/\s+/g, ' ')
    .replace(/\( /g, '(')
    .trim();
}

const TRANSACTION_CONTROL =
  /^\s*(BEGIN|START TRANSACTION|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|SET TRANSACTION)\b/i;

/** What a library sent around our statements to run a transaction: not ours, not data. */
export function isTransactionControl(text: string): boolean {
  return TRANSACTION_CONTROL.test(text);
}

// --- Postgres ------------------------------------------------------------------------------------

/** A fresh schema holding the canary `victim` (one row), checked through a connection of its own. */
export async function postgresScratch() {
  const schema = `sec_${Math.random().toString(36).slice(2, 10)}`;
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  await admin.query(`CREATE SCHEMA "${schema}"`);
  await admin.query(`CREATE TABLE "${schema}".victim (id int PRIMARY KEY, note text NOT NULL)`);
  await admin.query(`INSERT INTO "${schema}".victim VALUES (1, 'canary')`);
  const wire = await wireLog();
  return {
    schema,
    wire,
    /** Through the logging proxy, with the scratch schema as the search path. */
    url: wire.url(schema),
    query: async (text: string, values: unknown[] = []) => (await admin.query(text, values)).rows,
    /** The relations of the schema and the canary's rows: compare before and after. */
    async snapshot() {
      const relations = await admin.query(
        `SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = $1 ORDER BY c.relname`,
        [schema],
      );
      return { relations: relations.rows, victim: await this.canary() };
    },
    async canary() {
      return (await admin.query(`SELECT id, note FROM "${schema}".victim ORDER BY id`)).rows;
    },
    async close() {
      await wire.close();
      await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
      await admin.end();
    },
  };
}

export type PostgresScratch = Awaited<ReturnType<typeof postgresScratch>>;

// --- SQLite: better-sqlite3's statements, wrapped ----------------------------------------------

const sqliteLog: SqliteStatement[] = [];
let sqliteWrapped = false;

/**
 * Every statement any better-sqlite3 connection of this process runs from now on (the module is
 * shared with the code under test, the CLI's dynamic import included).
 */
export function sqliteStatements(): SqliteStatement[] {
  if (!sqliteWrapped) logBetterSqlite3((statement) => sqliteLog.push(statement));
  sqliteWrapped = true;
  return sqliteLog;
}

/** A fresh SQLite file holding the canary `victim` (one row). */
export function sqliteScratch() {
  const dir = mkdtempSync(join(tmpdir(), 'outboxer-security-'));
  const file = join(dir, 'app.db');
  const setup = new Database(file);
  setup.pragma('journal_mode = WAL');
  setup.exec(`CREATE TABLE victim (id INTEGER PRIMARY KEY, note TEXT NOT NULL);
    INSERT INTO victim VALUES (1, 'canary');`);
  setup.close();
  const log = sqliteStatements();
  /** Reads through a connection of its own, whose statements are left out of the log. */
  const look = <T>(fn: (db: Database.Database) => T): T => {
    const from = log.length;
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      return fn(db);
    } finally {
      db.close();
      log.splice(from);
    }
  };
  return {
    dir,
    file,
    url: `sqlite:${file}`,
    /** Statements run on this file (by any connection but the checks of this fixture). */
    statements: () => log.filter((s) => s.file === file),
    snapshot: () => ({
      relations: look((db) => db.prepare('SELECT name, type FROM sqlite_master ORDER BY name').raw().all()),
      victim: look((db) => db.prepare('SELECT id, note FROM victim ORDER BY id').all()),
    }),
    canary: () => look((db) => db.prepare('SELECT id, note FROM victim ORDER BY id').all()),
    close: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export type SqliteScratch = ReturnType<typeof sqliteScratch>;

export const CANARY = [{ id: 1, note: 'canary' }];

// --- The CLI --------------------------------------------------------------------------------------

function sink(): { stream: Writable; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  return { stream, text: () => chunks.join('') };
}

/** Streams for `runCli`: stdin is not a terminal, so a command that asks needs --yes. */
export function cliIo(databaseUrl: string): { io: CliIo; stdout: () => string; stderr: () => string } {
  const stdout = sink();
  const stderr = sink();
  const stdin = Object.assign(new PassThrough(), { isTTY: false });
  return {
    io: { env: { DATABASE_URL: databaseUrl }, stdin, stdout: stdout.stream, stderr: stderr.stream },
    stdout: stdout.text,
    stderr: stderr.text,
  };
}

/** Each command with what it needs to run without asking (ids, --older-than, --yes). */
export const CLI_COMMANDS: ReadonlyArray<[command: string, extra: readonly string[]]> = [
  ['migrate', []],
  ['sql', []],
  ['counts', []],
  ['pending', []],
  ['blocked', []],
  ['dead', []],
  ['retry-dead', ['--yes']],
  ['discard', ['1', '--yes']],
  ['prune', ['--older-than=1d', '--yes']],
];

/** Runs `fn` on one client of `pool` between BEGIN and COMMIT (ROLLBACK when it throws). */
export async function inPgTransaction(pool: pg.Pool, fn: (client: never) => unknown): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await fn(client as never);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
}
