/**
 * The CLI before it reaches any outbox: `sql` without a database, the SQLite file only `migrate`
 * creates, bad URLs that must never print their secrets, and bad command lines. Run as a child
 * process, as in cli.test.ts.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { postgresSchemaSql } from 'outboxer/pg';
import { sqliteSchemaSql } from 'outboxer/better-sqlite3';
import { cli } from './cli-process.js';

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
    // Nothing recorded yet: an empty result, not an error (see cli-first-run.test.ts).
    const none = await cli(['counts', '--json'], `sqlite:${file}`);
    expect(none).toMatchObject({ code: 0, stdout: '{}\n' });
    expect(none.stderr).toContain('No outbox is recorded in outboxer_messages_config yet');
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
