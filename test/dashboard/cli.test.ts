/**
 * `npx outboxer dashboard`: serves the page for the outboxes of a table until SIGTERM; bad flags
 * exit with 2 and say why.
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay } from 'outboxer';
// The CLI connects to Postgres and SQLite URLs (MySQL URLs are not supported by it yet).
import {
  DATABASE_URL,
  postgresAndSqlite as fixtures,
  publishInTransaction,
  type PostgresOrSqliteFixture as Fixture,
} from '../support/databases.js';
import { cli } from '../operations/cli-process.js';

const root = resolve(import.meta.dirname, '../..');

/** Starts `outboxer dashboard …`, resolves with its URL once it listens, and a stop that awaits its exit code. */
function startDashboard(args: string[], url: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/index.ts', 'dashboard', ...args], {
    cwd: root,
    env: { ...process.env, DATABASE_URL: url },
  });
  let stderr = '';
  const exited = new Promise<number>((done) => child.on('exit', (code) => done(code ?? 99)));
  const listening = new Promise<string>((done, fail) => {
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
      const found = /on (http:\/\/\S+) for/.exec(stderr);
      if (found) done(found[1]!);
    });
    void exited.then((code) => fail(new Error(`exited with ${code}: ${stderr}`)));
  });
  return {
    listening,
    stderr: () => stderr,
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

describe.each(fixtures)('outboxer dashboard on $name', ({ name, make }) => {
  let fixture: Fixture;
  let url: string;
  let extra: string[];
  beforeAll(async () => {
    fixture = await make();
    url = fixture.kind === 'sqlite' ? `sqlite:${fixture.db.name}` : DATABASE_URL;
    extra = fixture.kind === 'postgres' ? ['--schema', fixture.schema] : [];
    const outboxer = new Outboxer({
      database: fixture.database,
      testing: 'manual',
      ...(fixture.kind === 'postgres' ? { schema: fixture.schema } : {}),
      outboxes: { orders: { relay: functionRelay(async () => {}) } },
    }) as Outboxer<never, boolean>;
    await outboxer.migrate();
    await publishInTransaction(fixture, outboxer, [{ outbox: 'orders', payload: { n: 1 }, groupKey: 'a' }]);
  });
  afterAll(() => fixture.close());

  test(`serves the page and the API of the outbox, read-only unless asked (${name})`, async () => {
    const run = startDashboard(['--outbox', 'orders', '--port', '0', '--base-path', '/ops', ...extra], url);
    try {
      const base = await run.listening;
      expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/ops\/$/);
      expect(run.stderr()).toContain('(read-only)');
      expect(await (await fetch(base)).text()).toContain('<title>outboxer</title>');
      const overview = (await (await fetch(`${base}api/overview`)).json()) as {
        mutations: boolean;
        outboxes: Array<{ name: string; counts: { pending: number } }>;
      };
      expect(overview.mutations).toBe(false);
      expect(overview.outboxes.map((o) => [o.name, o.counts.pending])).toEqual([['orders', 1]]);
    } finally {
      expect(await run.stop()).toBe(0);
    }
    const writable = startDashboard(
      ['--outbox', 'orders', '--port', '0', '--allow-mutations', ...extra],
      url,
    );
    try {
      const base = await writable.listening;
      const overview = (await (await fetch(`${base}api/overview`)).json()) as { mutations: boolean };
      expect(overview.mutations).toBe(true);
    } finally {
      expect(await writable.stop()).toBe(0);
    }
  });

  test(`bad flags exit with 2 and name the flag (${name})`, async () => {
    for (const [args, message] of [
      [['dashboard', '--port', '70000'], /--port must be an integer from 0 to 65535/],
      [['dashboard', '--port', 'http'], /--port must be/],
      [['dashboard', '--host', 'a b;rm'], /--host must be an IP address or a host name/],
      [['counts', '--port', '8080'], /--port belongs to dashboard/],
      [['counts', '--allow-mutations'], /--allow-mutations belongs to dashboard/],
      [['dashboard', '--outbox', 'orders', '--base-path', 'ops', ...extra], /Option "basePath" must be/],
      [['dashboard', '--url', url, '--database-url', url], /same option/],
      [['dashboard', '--table', 'x;drop', ...extra], /--table/],
    ] as Array<[string[], RegExp]>) {
      const result = await cli(args, url);
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toMatch(message);
    }
  });
});
