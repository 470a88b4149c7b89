/**
 * `npx outboxer …` as a child process (node --import tsx src/cli/index.ts) against a real Postgres
 * and a real SQLite file: every command, --json, the confirmation prompt on a real terminal
 * (script(1) gives the child a pseudo-terminal), batches with progress, and errors that never
 * print the URL's secrets.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay, type Envelope, type OutboxOptions } from 'outboxer';
import { postgresSchemaSql } from 'outboxer/pg';
import { sqliteSchemaSql } from 'outboxer/better-sqlite3';
import { DATABASE_URL, fixtures, publishInTransaction, type Fixture } from '../support/databases.js';

const root = resolve(import.meta.dirname, '../..');
const entry = ['--import', 'tsx', 'src/cli/index.ts'];

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI with `DATABASE_URL` (or none) and stdin not a terminal. */
function cli(args: string[], url: string | undefined): Promise<Result> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.DATABASE_URL;
  if (url !== undefined) env.DATABASE_URL = url;
  return new Promise((done) => {
    const child = execFile(
      process.execPath,
      [...entry, ...args],
      { cwd: root, env },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 99;
        done({ code, stdout, stderr });
      },
    );
    child.stdin?.end();
  });
}

/**
 * Runs the CLI on a pseudo-terminal and types `answer` at its prompt. stdout and stderr arrive
 * merged, as on a screen.
 */
function cliOnTerminal(
  args: string[],
  url: string,
  answer: string,
): Promise<{ code: number; screen: string }> {
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const command = [process.execPath, ...entry, ...args].map(quote).join(' ');
  return new Promise((done, fail) => {
    const child = spawn('script', ['-qec', command, '/dev/null'], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: url },
    });
    let screen = '';
    let answered = false;
    child.stdout.on('data', (chunk: Buffer) => {
      screen += chunk.toString('utf8');
      if (!answered && screen.includes('[y/N]')) {
        answered = true;
        child.stdin.write(`${answer}\r`);
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (screen += chunk.toString('utf8')));
    child.on('error', fail);
    child.on('exit', (code) => done({ code: code ?? 99, screen }));
  });
}

function parse<T = unknown>(result: Result): T {
  expect(result.stderr === '' || !result.stderr.includes('outboxer:'), result.stderr).toBe(true);
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as T;
}

describe.each(fixtures)('outboxer CLI on $name', ({ make }) => {
  let fixture: Fixture;
  let url: string;
  let location: string[]; // --schema for Postgres; the file is in the URL for SQLite
  const poison = new Set<string>();
  const delivered: Array<{ outbox: string; id: number }> = [];
  const relay = functionRelay(async (m: Envelope) => {
    if (poison.has(String(m.payload))) throw new Error(`refused ${String(m.payload)}`);
    delivered.push({ outbox: m.outbox, id: m.id });
  });
  const recorded: Record<string, OutboxOptions> = {
    orders: { relay, partitions: 2, maxAttempts: 2, onDead: 'park' },
    audit: { relay },
  };
  let outboxer: Outboxer<never, boolean>;
  const run = (args: string[]) => cli([...args, ...location], url);
  const publish = (outbox: string, items: Array<[string, string | null]>) =>
    publishInTransaction(
      fixture,
      outboxer,
      items.map(([payload, groupKey]) => ({ outbox, payload, groupKey })),
    );
  const ids = { o1: 0, o2: 0, o3: 0, a1: 0, a2: 0 };

  beforeAll(async () => {
    fixture = await make();
    if (fixture.kind === 'postgres') {
      url = DATABASE_URL;
      location = ['--schema', fixture.schema];
    } else {
      url = `sqlite:${fixture.db.name}`;
      location = [];
    }
    outboxer = new Outboxer({
      database: fixture.database,
      testing: 'manual',
      outboxes: {
        ...recorded,
        bulk: { relay, maxAttempts: 1, batchSize: 1000 },
        kept: { relay, retention: { keep: 0 } },
      },
    }) as Outboxer<never, boolean>;
  });
  afterAll(async () => {
    await outboxer.close();
    await fixture.close();
  });

  test('migrate creates the tables; a relaying node records its outboxes in <table>_config', async () => {
    const result = await run(['migrate']);
    expect(result).toMatchObject({
      code: 0,
      stdout:
        'Migrated ' +
        (fixture.kind === 'postgres' ? `${fixture.schema}.` : '') +
        'outboxer_messages (with its _leases, _nodes and _config tables).\n',
    });
    expect(parse(await run(['migrate', '--json']))).toMatchObject({ migrated: true });

    const recorder = new Outboxer({ database: fixture.database, outboxes: recorded });
    await recorder.start();
    await recorder.stop();

    // orders: o1 fails twice, goes dead and parks order:1 (o2 waits); o3 is delivered.
    // audit: a1 keeps failing and holds a2 behind it.
    poison.add('o1').add('a1');
    [ids.o1, ids.o2, ids.o3] = (await publish('orders', [
      ['o1', 'order:1'],
      ['o2', 'order:1'],
      ['o3', 'order:2'],
    ])) as [number, number, number];
    [ids.a1, ids.a2] = (await publish('audit', [
      ['a1', 'user:7'],
      ['a2', 'user:7'],
    ])) as [number, number];
    await outboxer.drain('orders');
    await outboxer.drain('audit', { maxRounds: 2 });
  });

  test('counts: every recorded outbox, as a table and as JSON', async () => {
    const [json, table, single] = await Promise.all([
      run(['counts', '--json']),
      run(['counts']),
      run(['counts', '--outbox', 'orders', '--json']),
    ]);
    const counts = parse<Record<string, Record<string, unknown>>>(json);
    expect(Object.keys(counts)).toEqual(['audit', 'orders']);
    expect(counts.orders).toMatchObject({
      pending: 1,
      delivered: 0,
      dead: 1,
      orphaned: 0,
      relaySeenAt: null,
    });
    expect(counts.audit).toMatchObject({ pending: 2, delivered: 0, dead: 0, orphaned: 0 });
    expect(new Date(counts.audit!.oldestPendingAt as string).getTime()).toBeLessThanOrEqual(Date.now());

    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      /^OUTBOX\s+PENDING\s+DELIVERED\s+DEAD\s+ORPHANED\s+OLDEST PENDING\s+RELAY SEEN$/,
    );
    // Under a second old reads "now"; older, "<n>s ago" (a fast machine gets here within the second).
    expect(lines[1]).toMatch(/^audit\s+2\s+0\s+0\s+0\s+(now|\S.* ago)\s+never$/);
    expect(lines[2]).toMatch(/^orders\s+1\s+0\s+1\s+0\s+/);
    // The relaying node stopped: the backlog has nobody to deliver it.
    expect(table.stderr).toContain(
      'warning: audit: 2 messages are pending and no relaying node has ever been seen: is one running?',
    );

    const one = parse<Record<string, unknown>>(single);
    expect(Object.keys(one)).toEqual(['orders']);
  });

  test('counts --up-to: each figure counted up to n, shown as "n+" when it stopped there', async () => {
    const [json, table] = await Promise.all([
      run(['counts', '--outbox', 'audit', '--up-to', '1', '--json']),
      run(['counts', '--outbox', 'audit', '--up-to', '1']),
    ]);
    expect(parse<Record<string, Record<string, unknown>>>(json).audit).toMatchObject({
      pending: 1,
      dead: 0,
      exact: false,
    });
    expect(table.stdout.trimEnd().split('\n')[1]).toMatch(/^audit\s+1\+\s+0\s+0\s+/);
  });

  test('pending: oldest first, with attempts and the last error', async () => {
    const [json, table, ambiguous] = await Promise.all([
      run(['pending', '--outbox', 'audit', '--json']),
      run(['pending', '--outbox', 'audit', '--limit', '1']),
      run(['pending']),
    ]);
    const pending = parse<Array<Record<string, unknown>>>(json);
    expect(pending.map((m) => [m.id, m.groupKey, m.attempts, m.payload])).toEqual([
      [ids.a1, 'user:7', 2, 'a1'],
      [ids.a2, 'user:7', 0, 'a2'],
    ]);
    expect(pending[0]!.lastError).toBe('Error: refused a1');

    expect(table.stdout).toMatch(
      /^\s*ID\s+GROUP\s+TYPE\s+PART\s+ATTEMPTS\s+PUBLISHED\s+NEXT ATTEMPT\s+LAST ERROR\n/,
    );
    expect(table.stdout).toContain('Error: refused a1');
    expect(table.stdout).not.toContain(String(ids.a2) + ' ');
    expect(table.stderr).toContain('(the first 1; pass --limit for more)');

    expect(ambiguous.code).toBe(2);
    expect(ambiguous.stderr).toContain('holds several outboxes (audit, orders): pass --outbox <name>');
  });

  test('blocked: the retrying head of a group, and a parked one (found automatically)', async () => {
    const [auditJson, ordersJson, continueJson, table] = await Promise.all([
      run(['blocked', '--outbox', 'audit', '--json']),
      run(['blocked', '--outbox', 'orders', '--json']),
      run(['blocked', '--outbox', 'orders', '--on-dead', 'continue', '--json']),
      run(['blocked', '--outbox', 'orders']),
    ]);
    const audit = parse<Array<Record<string, unknown>>>(auditJson);
    expect(audit).toMatchObject([
      { groupKey: 'user:7', headId: ids.a1, parked: false, attempts: 2, waiting: 1 },
    ]);

    const orders = parse<Array<Record<string, unknown>>>(ordersJson);
    expect(orders).toMatchObject([
      { groupKey: 'order:1', headId: ids.o1, parked: true, waiting: 1, nextAttemptAt: null },
    ]);
    // Told the outbox does not park, it shows retrying heads only.
    expect(parse(continueJson)).toEqual([]);

    expect(table.stdout).toMatch(
      /^GROUP\s+HEAD\s+STATE\s+ATTEMPTS\s+FAILING SINCE\s+NEXT ATTEMPT\s+WAITING\s+LAST ERROR\n/,
    );
    expect(table.stdout).toMatch(
      new RegExp(`order:1\\s+${ids.o1}\\s+parked\\s+2\\s+(now|.* ago)\\s+-\\s+1\\s+Error: refused o1`),
    );
  });

  test('dead: the dead messages', async () => {
    const dead = parse<Array<Record<string, unknown>>>(await run(['dead', '--outbox', 'orders', '--json']));
    expect(dead.map((m) => [m.id, m.attempts, m.lastError])).toEqual([[ids.o1, 2, 'Error: refused o1']]);
    expect((await run(['dead', '--outbox', 'audit'])).stdout).toBe('No dead messages in outbox audit.\n');
  });

  test('discard on a parking outbox leaves parked groups parked (--on-dead auto finds park)', async () => {
    poison.add('o4');
    const [o4, o5] = await publish('orders', [
      ['o4', 'order:3'],
      ['o5', 'order:3'],
    ]);
    await outboxer.drain('orders', { maxRounds: 1 }); // o4 failed once, o5 waits behind it
    expect(parse(await run(['discard', String(o4), '--outbox', 'orders', '--yes', '--json']))).toEqual({
      outbox: 'orders',
      discarded: 1,
    });
    delivered.length = 0;
    await outboxer.drain('orders');
    // order:3 moved on; order:1 still waits behind its dead head (o2 was not released).
    expect(delivered.map((d) => d.id)).toEqual([o5]);
    expect(await outboxer.blockedGroups('orders')).toMatchObject([
      { groupKey: 'order:1', headId: ids.o1, parked: true, waiting: 1 },
    ]);
  });

  test('retry-dead asks first: refused without a terminal, declined with "n", done with "y"', async () => {
    const refused = await run(['retry-dead', '--outbox', 'orders']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('stdin is not a terminal: pass --yes');

    const declined = await cliOnTerminal(['retry-dead', '--outbox', 'orders', ...location], url, 'n');
    expect(declined.screen).toContain('Make the 1 dead message of outbox orders pending again?');
    expect(declined.screen).toContain('Nothing was changed.');
    expect(declined.code).toBe(1);
    expect((await outboxer.counts('orders')).dead).toBe(1);

    const accepted = await cliOnTerminal(['retry-dead', '--outbox', 'orders', ...location], url, 'y');
    expect(accepted.screen).toContain('Revived 1 dead message of outbox orders');
    expect(accepted.code).toBe(0);

    // Parked: the group is redelivered in its order once the cause is fixed.
    poison.clear();
    delivered.length = 0;
    await outboxer.drain('orders');
    expect(delivered.map((d) => d.id)).toEqual([ids.o1, ids.o2]);
    expect(await outboxer.counts('orders')).toMatchObject({ pending: 0, dead: 0 });
  });

  test('discard: the head of a blocked group goes, and the group moves on', async () => {
    const result = parse(await run(['discard', String(ids.a1), '--outbox', 'audit', '--yes', '--json']));
    expect(result).toEqual({ outbox: 'audit', discarded: 1 });
    expect(await outboxer.blockedGroups('audit')).toEqual([]);
    delivered.length = 0;
    await outboxer.drain('audit');
    expect(delivered.map((d) => d.id)).toEqual([ids.a2]);

    const nothing = await run(['discard', '--outbox', 'audit']);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toContain('discard needs message ids');
  });

  test('retry-dead and discard --dead page through thousands of dead messages, with progress', async () => {
    poison.clear();
    const payloads = Array.from({ length: 2500 }, (_, i) => `bulk-${i}`);
    for (const p of payloads) poison.add(p);
    await publish(
      'bulk',
      payloads.map((p) => [p, null]),
    );
    await outboxer.drain('bulk');
    expect((await outboxer.counts('bulk')).dead).toBe(2500);

    const retried = await run(['retry-dead', '--outbox', 'bulk', '--yes']);
    expect(retried.code, retried.stderr).toBe(0);
    expect(retried.stderr).toContain('revived 1,000 of 2,500 (40%)\n');
    expect(retried.stderr).toContain('revived 2,500 of 2,500 (100%)\n');
    expect(retried.stdout).toMatch(/^Revived 2,500 dead messages of outbox bulk in /);
    expect(await outboxer.counts('bulk')).toMatchObject({ pending: 2500, dead: 0 });

    await outboxer.drain('bulk');
    // Not recorded in <table>_config (never started by a relaying node): partitions unknown.
    const counts = parse<Record<string, Record<string, unknown>>>(
      await run(['counts', '--outbox', 'bulk', '--json']),
    );
    expect(counts.bulk).toMatchObject({ pending: 0, dead: 2500, orphaned: null });

    const discarded = await run(['discard', '--dead', '--outbox', 'bulk', '--yes', '--json']);
    expect(JSON.parse(discarded.stdout)).toEqual({ outbox: 'bulk', discarded: 2500 });
    expect(discarded.stderr).toContain('discarded 1,000 of 2,500 (40%)\n');
    expect(await outboxer.counts('bulk')).toMatchObject({ pending: 0, dead: 0 });
    // Neither recorded nor holding a message: indistinguishable from a typo.
    const gone = await run(['counts', '--outbox', 'bulk']);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('Unknown outbox "bulk"');
  });

  test('prune deletes delivered messages past --older-than', async () => {
    await publish('kept', [
      ['k1', null],
      ['k2', null],
      ['k3', null],
    ]);
    await outboxer.drain('kept');
    expect((await outboxer.counts('kept')).delivered).toBe(3);

    const missing = await run(['prune', '--outbox', 'kept', '--yes']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('prune needs --older-than');

    expect(parse(await run(['prune', '--outbox', 'kept', '--older-than', '1h', '--yes', '--json']))).toEqual({
      outbox: 'kept',
      pruned: 0,
    });
    const pruned = await run(['prune', '--outbox', 'kept', '--older-than', '0', '--yes']);
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(pruned.stdout).toMatch(/^Pruned 3 delivered messages of outbox kept in /);
    expect(pruned.stderr).toContain('pruned 3\n');
    expect((await outboxer.counts('kept')).delivered).toBe(0);
  });

  test('errors: an unknown outbox, a missing table', async () => {
    const unknown = await run(['counts', '--outbox', 'ordres']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('Unknown outbox "ordres"');
    expect(unknown.stderr).toContain('Recorded outboxes: audit, orders.');
    expect(unknown.stdout).toBe('');

    const table = await run(['counts', '--table', 'no_such_table']);
    expect(table.code).toBe(1);
    expect(table.stderr).toContain('Run outboxer migrate, or check --table and --schema');
  });
});

describe('outboxer CLI without a database', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'outboxer-cli-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('sql prints the DDL of migrate, for the dialect of DATABASE_URL or --dialect', async () => {
    const [plain, qualified, fromUrl, flagged] = await Promise.all([
      cli(['sql'], undefined),
      cli(['sql', '--table', 'app.events'], undefined),
      cli(['sql'], 'sqlite:./x.db'),
      cli(['sql', '--dialect', 'sqlite', '--table', 'events'], undefined),
    ]);
    expect(plain).toEqual({ code: 0, stdout: postgresSchemaSql(), stderr: '' });
    expect(qualified.stdout).toBe(postgresSchemaSql({ table: 'app.events' }));
    expect(fromUrl.stdout).toBe(sqliteSchemaSql());
    expect(flagged.stdout).toBe(sqliteSchemaSql({ table: 'events' }));
  });

  test('a SQLite file is created by migrate only', async () => {
    const file = join(dir, 'app.db');
    const missing = await cli(['counts'], `sqlite:${file}`);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`No SQLite database at ${file} (only migrate creates one)`);
    expect(existsSync(file)).toBe(false);
    expect((await cli(['migrate'], `sqlite:${file}`)).code).toBe(0);
    expect(existsSync(file)).toBe(true);
    const none = await cli(['counts'], `sqlite:${file}`);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('No outbox is recorded in outboxer_messages_config');
  });

  test('bad URLs fail without printing the URL or its password', async () => {
    const secret = 's3cr3t-pw';
    const cases: Array<[string, number, string]> = [
      [`postgres://alice:${secret}@127.0.0.1:1/orders`, 1, 'could not connect to the database'],
      [`postgres://alice:${secret}@[::1/orders`, 2, 'DATABASE_URL is not a valid postgres:// URL'],
      [
        `mysql://alice:${secret}@db.internal/orders`,
        2,
        'must be a postgres:// or postgresql:// URL, or sqlite:<path>',
      ],
      [
        `alice:${secret}@db.internal/orders`,
        2,
        'must be a postgres:// or postgresql:// URL, or sqlite:<path>',
      ],
      [`postgres://alice@127.0.0.1:1/orders?password=${secret}`, 1, 'could not connect to the database'],
    ];
    const results = await Promise.all(cases.map(([url]) => cli(['counts'], url)));
    for (const [i, [url, code, message]] of cases.entries()) {
      const result = results[i]!;
      expect(result.code, `${url}: ${result.stderr}`).toBe(code);
      expect(result.stderr).toContain(message);
      expect(result.stderr + result.stdout).not.toContain(secret);
      expect(result.stderr).not.toContain('alice:');
    }
    const unset = await cli(['counts'], undefined);
    expect(unset.code).toBe(2);
    expect(unset.stderr).toContain('Set DATABASE_URL (or pass --url)');
  });

  test('bad command lines exit with 2; --help and --version with 0', async () => {
    const [unknownCommand, unknownOption, badId, help, version] = await Promise.all([
      cli(['count'], undefined),
      cli(['counts', '--outbx', 'orders'], undefined),
      cli(['discard', '12x', '--yes'], undefined),
      cli(['--help'], undefined),
      cli(['--version'], undefined),
    ]);
    expect(unknownCommand.code).toBe(2);
    expect(unknownCommand.stderr).toContain('Unknown command "count"');
    expect(unknownOption.code).toBe(2);
    expect(unknownOption.stderr).toContain("Unknown option '--outbx'");
    expect(badId.code).toBe(2);
    expect(badId.stderr).toContain('Message ids are positive integers; got "12x"');
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: outboxer <command> [options]');
    expect(version.stdout).toMatch(/^\d+\.\d+\.\d+/);
  });
});
