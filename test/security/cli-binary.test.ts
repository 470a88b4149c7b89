/**
 * The real CLI, as a child process (node --import tsx src/cli/index.ts), the way the probe ran it:
 * on Postgres through the logging proxy (which counts its connections and logs every statement
 * with its values), on SQLite with better-sqlite3's statements logged by a preload.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runCli } from '../../src/cli/run.js';
import { CANARY, cliIo, postgresScratch, sqliteScratch, type LoggedStatement } from './support.js';

const root = resolve(import.meta.dirname, '../..');

interface Target {
  readonly url: string;
  readonly schema: string;
  /** For the child: where the SQLite preload logs. */
  readonly env: Record<string, string>;
  /** The statements the child ran, and the connections it opened, since the last call. */
  drain(): { statements: LoggedStatement[]; connections: number };
  snapshot(): Promise<unknown>;
  canary(): Promise<unknown>;
  close(): Promise<void>;
}

/** Runs the CLI with `DATABASE_URL`, stdin not a terminal, and (for SQLite) the statement log. */
function cli(target: Target, args: string[]) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((done) => {
    const child = execFile(
      process.execPath,
      ['--import', 'tsx', '--import', './test/security/sqlite-log.ts', 'src/cli/index.ts', ...args],
      { cwd: root, env: { ...process.env, DATABASE_URL: target.url, ...target.env }, timeout: 60_000 },
      (error, stdout, stderr) =>
        done({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 99, stdout, stderr }),
    );
    child.stdin?.end();
  });
}

async function postgresTarget(): Promise<Target> {
  const scratch = await postgresScratch();
  let seen = { statements: 0, connections: 0 };
  return {
    url: scratch.url,
    schema: scratch.schema,
    env: {},
    drain() {
      const result = {
        statements: scratch.wire.statements.slice(seen.statements),
        connections: scratch.wire.connections() - seen.connections,
      };
      seen = { statements: scratch.wire.statements.length, connections: scratch.wire.connections() };
      return result;
    },
    snapshot: () => scratch.snapshot(),
    canary: () => scratch.canary(),
    close: () => scratch.close(),
  };
}

async function sqliteTarget(): Promise<Target> {
  const scratch = sqliteScratch();
  const log = join(scratch.dir, 'statements.jsonl');
  return {
    url: scratch.url,
    schema: 'main',
    env: { OUTBOXER_SQLITE_LOG: log },
    drain() {
      const lines = existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];
      rmSync(log, { force: true });
      return { statements: lines.map((line) => JSON.parse(line) as LoggedStatement), connections: 0 };
    },
    snapshot: async () => scratch.snapshot(),
    canary: async () => scratch.canary(),
    close: async () => scratch.close(),
  };
}

describe.each([
  ['Postgres', postgresTarget],
  ['SQLite', sqliteTarget],
])('the outboxer binary on %s', (_name, open) => {
  let target: Target;
  let before: unknown;

  beforeAll(async () => {
    target = await open();
    expect(await runCli(['migrate', '--table=cli_msgs'], cliIo(target.url).io)).toBe(0);
    before = await target.snapshot();
    target.drain();
  });

  afterAll(async () => {
    let after: unknown;
    try {
      after = await target.snapshot();
    } finally {
      await target.close();
    }
    expect(after).toEqual(before);
  });

  test.each([
    // The probe's command, verbatim but for the schema of the canary.
    [
      'counts',
      '--schema',
      (s: string) => ['--table', 'cli_msgs', '--schema', `${s}"."cli_msgs_config"; DROP TABLE victim; --`],
    ],
    ['sql', '--schema', () => ['--schema', 'x"; DROP TABLE victim; --']],
    ['migrate', '--schema', () => ['--table', 'cli_msgs', '--schema', 'x"; DROP TABLE victim; --']],
    ['pending', '--table', () => ['--table', 'x"; DROP TABLE victim; --']],
    ['discard', '--table', (s: string) => ['1', '--yes', '--table', `${s}"."victim`]],
    [
      'prune',
      '--schema',
      () => ['--older-than', '0', '--yes', '--table', 'cli_msgs', '--schema', "'; DROP TABLE victim; --"],
    ],
  ] as const)(
    '%s with a hostile %s: exit 2 naming it, before connecting; the canary stays',
    async (command, flag, args) => {
      const result = await cli(target, [command, ...args(target.schema)]);
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain(`"${flag}" must match`);
      expect(result.stdout).toBe('');
      expect(target.drain()).toEqual({ statements: [], connections: 0 });
      expect(await target.canary()).toEqual(CANARY);
    },
  );

  test('a hostile --outbox is a value: "unknown outbox", and it is only ever bound as a parameter', async () => {
    const value = "x'); DROP TABLE victim; --";
    const result = await cli(target, ['dead', '--table', 'cli_msgs', '--outbox', value]);
    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr).toContain(`Unknown outbox ${JSON.stringify(value)}`);
    const { statements } = target.drain();
    expect(statements.map((s) => s.text)).toEqual([
      'SELECT outbox, partitions, ordering, on_dead FROM "cli_msgs_config" ORDER BY outbox',
      expect.stringMatching(/^SELECT 1 AS found FROM "cli_msgs" WHERE outbox = (\$1|\?) LIMIT 1$/),
    ]);
    expect(statements[1]!.values).toEqual([value]);
    expect(await target.canary()).toEqual(CANARY);
  });
});
