/**
 * The CLI through its programmatic entry, `runCli`, on Postgres (through the logging proxy) and on
 * SQLite (better-sqlite3's statements logged): every command with hostile --table and --schema,
 * which must be refused as bad usage (exit 2, naming the flag) before the database is reached,
 * and with hostile --outbox values, which travel as parameters only: the statements the command
 * runs are the very ones it runs for a plain unknown outbox, their values aside.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { nodePostgres } from 'outboxer/pg';
import { runCli } from '../../src/cli/run.js';
import {
  CANARY,
  CLI_COMMANDS,
  HOSTILE_VALUES,
  cliIo,
  hostileIdentifiers,
  postgresScratch,
  sqliteScratch,
  type LoggedStatement,
  inPgTransaction,
} from './support.js';

interface Target {
  readonly url: string;
  /** The schema the table lives in: `main` on SQLite. */
  readonly schema: string;
  statements(): LoggedStatement[];
  connections(): number;
  snapshot(): Promise<unknown>;
  canary(): Promise<unknown>;
  close(): Promise<void>;
}

async function postgresTarget(): Promise<Target> {
  const scratch = await postgresScratch();
  return {
    url: scratch.url,
    schema: scratch.schema,
    statements: () => scratch.wire.statements,
    connections: scratch.wire.connections,
    snapshot: () => scratch.snapshot(),
    canary: () => scratch.canary(),
    close: () => scratch.close(),
  };
}

async function sqliteTarget(): Promise<Target> {
  const scratch = sqliteScratch();
  return {
    url: scratch.url,
    schema: 'main',
    statements: scratch.statements,
    connections: () => 0,
    snapshot: async () => scratch.snapshot(),
    canary: async () => scratch.canary(),
    close: async () => scratch.close(),
  };
}

async function cli(target: Target, args: string[]) {
  const { io, stdout, stderr } = cliIo(target.url);
  const from = target.statements().length;
  const connections = target.connections();
  const code = await runCli(args, io);
  return {
    code,
    stdout: stdout(),
    stderr: stderr(),
    statements: target.statements().slice(from),
    connections: target.connections() - connections,
  };
}

/** Hostile strings for a flag (argv holds strings only), and the table forms that smuggle them in. */
function hostileFlags(schema: string): Array<[flag: '--table' | '--schema', args: string[]]> {
  const strings = hostileIdentifiers(schema)
    .map(([, value]) => value)
    .filter((value): value is string => typeof value === 'string');
  return [
    // The probe's own --schema first: on a CLI that lets it through, it drops the canary.
    ['--schema', ['--table=msgs', `--schema=${schema}"."msgs_config"; DROP TABLE victim; --`]],
    ...strings.map((s): ['--schema', string[]] => ['--schema', ['--table=msgs', `--schema=${s}`]]),
    ...strings.map((s): ['--schema', string[]] => ['--schema', [`--table=${schema}.msgs`, `--schema=${s}`]]),
    ...strings.map((s): ['--table', string[]] => ['--table', [`--table=${s}`]]),
    ...strings.map((s): ['--table', string[]] => ['--table', [`--table=${s}.msgs`]]),
    ...strings.map((s): ['--table', string[]] => ['--table', [`--table=${schema}.${s}`]]),
    ['--table', [`--table=${'m'.repeat(49)}`]],
  ];
}

describe.each([
  ['Postgres', postgresTarget],
  ['SQLite', sqliteTarget],
])('runCli on %s', (name, open) => {
  let target: Target;
  let before: unknown;

  beforeAll(async () => {
    target = await open();
    expect((await cli(target, ['migrate', '--table=msgs'])).code).toBe(0);
    // One message of outbox `orders`, so the commands that read find something.
    if (name === 'Postgres') {
      const pool = new pg.Pool({ connectionString: target.url, max: 1 });
      const outboxer = new Outboxer({
        database: nodePostgres(pool),
        relay: false,
        outboxes: { orders: { table: 'msgs' } },
      });
      await inPgTransaction(pool, (client) =>
        outboxer.publish(client, 'orders', { n: 1 }, { groupKey: 'g' }),
      );
      await pool.end();
    } else {
      const db = new Database(target.url.slice('sqlite:'.length));
      const outboxer = new Outboxer({
        database: betterSqlite3(db),
        relay: false,
        outboxes: { orders: { table: 'msgs' } },
      });
      db.transaction(() => outboxer.publish(db, 'orders', { n: 1 }, { groupKey: 'g' }))();
      db.close();
    }
    before = await target.snapshot();
  });

  afterAll(async () => {
    // Nothing any test ran dropped, created or changed a table, or touched the canary.
    let after: unknown;
    try {
      after = await target.snapshot();
    } finally {
      await target.close();
    }
    expect(after).toEqual(before);
  });

  test.each(CLI_COMMANDS)(
    '%s: a hostile --table or --schema is bad usage (exit 2, naming the flag), refused before connecting',
    async (command, extra) => {
      for (const [flag, args] of hostileFlags(target.schema)) {
        const result = await cli(target, [command, ...args, ...extra]);
        const what = `${command} ${JSON.stringify(args)}`;
        expect(result.code, `${what}: ${result.stderr}`).toBe(2);
        expect(result.stderr, what).toContain(flag);
        expect(result.stdout, what).toBe('');
        expect(result.statements, what).toEqual([]);
        expect(result.connections, what).toBe(0);
      }
      expect(await target.canary()).toEqual(CANARY);
    },
  );

  test.each(CLI_COMMANDS)(
    '%s: a hostile --outbox travels as a value, in the statements a plain unknown outbox runs',
    async (command, extra) => {
      const baseline = await cli(target, [command, '--table=msgs', '--outbox=nosuch', ...extra]);
      const values = name === 'SQLite' ? [...HOSTILE_VALUES, 'a\0b'] : HOSTILE_VALUES;
      for (const value of values) {
        const result = await cli(target, [command, '--table=msgs', `--outbox=${value}`, ...extra]);
        const what = `${command} --outbox=${JSON.stringify(value)}: ${result.stderr}`;
        if (command === 'sql') {
          // The DDL takes no outbox.
          expect(result, what).toEqual(baseline);
        } else if (command === 'migrate') {
          // The name keys the outbox of the instance migrate builds: refused when not a plain name,
          // otherwise the migration it runs does not depend on it.
          if (result.code === 2) {
            expect(result.stderr, what).toMatch(/outbox name/);
            expect(result.statements, what).toEqual([]);
          } else {
            expect(result.code, what).toBe(0);
            expect(result.statements.map((s) => s.text)).toEqual(baseline.statements.map((s) => s.text));
          }
        } else {
          expect(baseline.code).toBe(1);
          expect(baseline.stderr).toContain('Unknown outbox "nosuch"');
          expect(result.code, what).toBe(1);
          expect(result.stderr, what).toContain(`Unknown outbox ${JSON.stringify(value)}`);
          // Statement for statement: the same text; the outbox's value where "nosuch" was.
          expect(result.statements, what).toEqual(
            baseline.statements.map((s) => ({
              ...s,
              values: s.values.map((v) => (v === 'nosuch' ? value : v)),
            })),
          );
          expect(
            result.statements.some((s) => s.values.includes(value)),
            what,
          ).toBe(true);
        }
      }
      expect(await target.canary()).toEqual(CANARY);
    },
  );

  test('with plain names every command runs, and runs nothing that names the canary', async () => {
    for (const [command, extra] of CLI_COMMANDS) {
      const result = await cli(target, [
        command,
        `--table=${target.schema}.msgs`,
        '--outbox=orders',
        '--json',
        ...extra.filter((arg) => arg !== '1'),
        ...(command === 'discard' ? ['--dead'] : []),
      ]);
      expect(result.code, `${command}: ${result.stderr}`).toBe(0);
      if (command !== 'sql') expect(result.statements.length, command).toBeGreaterThan(0);
      for (const statement of result.statements) expect(statement.text).not.toMatch(/victim/i);
    }
    expect(await target.canary()).toEqual(CANARY);
  });
});
