/**
 * The CLI's pure parts, in process: URL parsing and scrubbing, the command line, durations,
 * tables and progress. The commands themselves run as a child process in cli.test.ts.
 */
import { PassThrough } from 'node:stream';
import { describe, expect, test } from 'vitest';
import { parseDatabaseUrl, scrub } from '../../src/cli/connection.js';
import { duration, printable, relative, table } from '../../src/cli/format.js';
import { parseCommandLine, parseDuration } from '../../src/cli/options.js';
import { Progress, confirm, type CliIo } from '../../src/cli/terminal.js';
import { CliError, UsageError } from '../../src/cli/usage-error.js';

describe('database URLs', () => {
  test('Postgres URLs keep their text; their secrets are listed for scrubbing', () => {
    const target = parseDatabaseUrl('postgres://ops:p%40ss-word@db.internal:5432/shop?sslmode=require');
    expect(target).toMatchObject({
      kind: 'postgres',
      url: 'postgres://ops:p%40ss-word@db.internal:5432/shop?sslmode=require',
    });
    const message = 'failed for postgres://ops:p%40ss-word@db.internal:5432/shop?sslmode=require: p@ss-word';
    expect(scrub(message, target.secrets)).toBe('failed for ***: ***');
    const query = parseDatabaseUrl('postgresql://ops@db/shop?password=hunter22');
    expect(scrub('password=hunter22 rejected', query.secrets)).toBe('password=*** rejected');
  });

  test('sqlite:<path>, relative or absolute', () => {
    expect(parseDatabaseUrl('sqlite:/var/lib/app.db')).toMatchObject({
      kind: 'sqlite',
      path: '/var/lib/app.db',
    });
    expect(parseDatabaseUrl('sqlite:///var/lib/app.db')).toMatchObject({ path: '/var/lib/app.db' });
    expect(parseDatabaseUrl('sqlite:./app.db')).toMatchObject({ path: `${process.cwd()}/app.db` });
    expect(parseDatabaseUrl('sqlite:app.db')).toMatchObject({ path: `${process.cwd()}/app.db` });
  });

  test.each([
    ['', 'Set DATABASE_URL'],
    ['sqlite:', 'sqlite:<path to a file>'],
    ['mysql://root:hunter22@db/shop', 'must be a postgres://'],
    ['root:hunter22@db/shop', 'must be a postgres://'],
    ['postgres://root:hunter22@[db/shop', 'not a valid postgres:// URL'],
  ])('%j is refused without being shown', (url, message) => {
    let error: unknown;
    try {
      parseDatabaseUrl(url);
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toContain(message);
    if (url !== '') expect((error as Error).message).not.toContain('hunter22');
  });
});

describe('the command line', () => {
  test('defaults', () => {
    expect(parseCommandLine(['counts'])).toMatchObject({
      command: 'counts',
      table: 'outboxer_messages',
      onDead: 'auto',
      json: false,
      yes: false,
      limit: 100,
      ids: [],
    });
  });

  test('ids as arguments or comma-separated, deduplicated', () => {
    expect(parseCommandLine(['discard', '12,13', '14', '12', '-y']).ids).toEqual([12, 13, 14]);
    expect(parseCommandLine(['retry-dead']).ids).toEqual([]);
  });

  test.each([
    [['counts', '12'], 'counts takes no arguments'],
    [['discard'], 'discard needs message ids'],
    [['discard', '1', '--dead'], 'not both'],
    [['dead', '--dead'], '--dead belongs to discard'],
    [['prune'], 'prune needs --older-than'],
    [['counts', '--older-than', '1d'], '--older-than belongs to prune'],
    [['pending', '--up-to', '10'], '--up-to belongs to counts'],
    [['counts', '--up-to', '0'], '--up-to must be an integer from 1 to 1000000000'],
    [['counts', '--limit', '0'], '--limit must be an integer from 1 to 10000'],
    [['counts', '--partitions', 'two'], '--partitions must be an integer'],
    [['counts', '--on-dead', 'parked'], '--on-dead must be auto, continue or park'],
    [['sql', '--dialect', 'mysql'], '--dialect must be postgres or sqlite'],
    [['count'], 'Unknown command "count"'],
    [[], 'Which command?'],
  ])('%j is a usage error', (argv, message) => {
    expect(() => parseCommandLine(argv)).toThrow(message);
  });

  test('durations', () => {
    expect(parseDuration('0')).toBe(0);
    expect(parseDuration('90')).toBe(90);
    expect(parseDuration('15m')).toBe(900);
    expect(parseDuration('7d')).toBe(604_800);
    expect(parseDuration('500ms')).toBe(0.5);
    expect(() => parseDuration('7 days')).toThrow('--older-than must be a duration');
  });
});

describe('output', () => {
  test('tables align columns and neutralise control characters', () => {
    expect(
      table(
        ['ID', 'GROUP'],
        [
          ['7', 'order:7'],
          ['1234', 'evil\u001b[2J\nkey'],
        ],
        ['right'],
      ),
    ).toBe('  ID  GROUP\n   7  order:7\n1234  evil\\u001b[2J\\nkey\n');
    expect(printable('a\tb')).toBe('a b');
  });

  test('durations and relative times', () => {
    expect(duration(350)).toBe('350ms');
    expect(duration(61_000)).toBe('1m 1s');
    expect(duration(3_600_000)).toBe('1h');
    expect(duration(90_061_000)).toBe('1d 1h');
    const now = Date.now();
    expect(relative(new Date(now - 125_000), now)).toBe('2m 5s ago');
    expect(relative(new Date(now + 30_000), now)).toBe('in 30s');
    expect(relative(null, now)).toBe('-');
  });
});

function fakeIo(tty: boolean): CliIo & { err: () => string } {
  const stderr = Object.assign(new PassThrough(), { isTTY: tty });
  const chunks: string[] = [];
  stderr.on('data', (chunk: Buffer) => chunks.push(chunk.toString('utf8')));
  return {
    env: {},
    stdin: Object.assign(new PassThrough(), { isTTY: tty }),
    stdout: new PassThrough(),
    stderr,
    err: () => chunks.join(''),
  };
}

describe('progress and confirmation', () => {
  test('in a log: the first batch, at most a line a second, and always the last', async () => {
    const io = fakeIo(false);
    let now = 10_000;
    const progress = new Progress(io, 'revived', 2500, () => now);
    progress.add(1000);
    now += 200;
    progress.add(1000);
    now += 200;
    progress.add(500);
    progress.finish();
    await new Promise((resolve) => setImmediate(resolve));
    expect(io.err()).toBe('revived 1,000 of 2,500 (40%)\nrevived 2,500 of 2,500 (100%)\n');
  });

  test('on a terminal: one line rewritten in place', async () => {
    const io = fakeIo(true);
    const progress = new Progress(io, 'pruned', undefined, () => 0);
    progress.add(10_000);
    progress.finish();
    await new Promise((resolve) => setImmediate(resolve));
    expect(io.err()).toBe('\r\u001b[Kpruned 10,000\r\u001b[Kpruned 10,000\n');
  });

  test('confirmation refuses without a terminal', async () => {
    await expect(confirm(fakeIo(false), 'Go?', 'discard')).rejects.toThrow(
      'discard asks for confirmation, and stdin is not a terminal: pass --yes',
    );
    expect(new UsageError('x').exitCode).toBe(2);
    expect(new CliError('x').exitCode).toBe(1);
  });
});
