/**
 * The security probe's findings (2026-12-01), each as it was reproduced: SQL through the CLI's
 * --schema and the exported DDL, spoofed outboxer-* headers, unbounded inputs, input silently
 * changed or lost, and header text no relay can send. Each is refused with a typed error before
 * anything is written, and the caller's transaction goes on. (The webhook's redaction gaps have
 * their own file, test/relays/webhook-redaction.test.ts.)
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay, isOutboxerError, type ErrorCode, type PublishInput } from 'outboxer';
import { postgresSchemaSql } from 'outboxer/pg';
import { sqliteSchemaSql } from 'outboxer/better-sqlite3';
import { webhookRelay } from 'outboxer/webhook';
import {
  DATABASE_URL,
  postgresAndSqlite as fixtures,
  postgresFixture,
  type PostgresOrSqliteFixture as Fixture,
} from '../support/databases.js';
import { startReceiver } from '../operations/support.js';

const root = resolve(import.meta.dirname, '../..');
const HOSTILE_SCHEMA = 'public"."cli_msgs_config"; DROP TABLE victim; --';

/** The CLI as a child process, the way the probe ran it. */
function cli(args: string[], url: string): Promise<{ code: number; stderr: string; stdout: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli/index.ts', ...args],
      { cwd: root, env: { ...process.env, DATABASE_URL: url } },
      (error, stdout, stderr) =>
        done({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 99, stdout, stderr }),
    );
  });
}

async function thrown(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

async function expectCode(fn: () => unknown, code: ErrorCode, message?: RegExp): Promise<void> {
  const error = await thrown(fn);
  expect(isOutboxerError(error), `expected OutboxerError ${code}, got ${String(error)}`).toBe(true);
  expect((error as { code: string }).code).toBe(code);
  if (message !== undefined) expect((error as Error).message).toMatch(message);
}

describe('finding 1: the CLI refuses a --schema or --table that is not a plain identifier', () => {
  let fixture: Awaited<ReturnType<typeof postgresFixture>>;
  let url: string;

  beforeAll(async () => {
    fixture = await postgresFixture(2);
    const address = new URL(DATABASE_URL);
    address.searchParams.set('options', `-c search_path=${fixture.schema}`);
    url = address.href;
    await fixture.query('CREATE TABLE victim (id int)');
    await fixture.query('INSERT INTO victim VALUES (1)');
    expect((await cli(['migrate', '--table', 'cli_msgs'], url)).code).toBe(0);
  }, 120_000);
  afterAll(() => fixture.close());

  test.each(['counts', 'pending', 'dead', 'blocked', 'retry-dead', 'discard', 'prune', 'sql'])(
    '%s: exit 2 naming --schema, and the canary table is still there',
    async (command) => {
      const extra =
        command === 'discard' ? ['1', '--yes'] : command === 'prune' ? ['--older-than', '1d', '--yes'] : [];
      const extraYes = command === 'retry-dead' ? ['--yes'] : [];
      const result = await cli(
        [command, '--table', 'cli_msgs', '--schema', HOSTILE_SCHEMA, ...extra, ...extraYes],
        url,
      );
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(/"--schema" must match/);
      expect(await fixture.query('SELECT id FROM victim')).toEqual([{ id: 1 }]);
    },
    60_000,
  );

  test('a --table that carries SQL in its schema part is refused the same way', async () => {
    const result = await cli(['counts', '--table', 'x"; DROP TABLE victim; --.cli_msgs'], url);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/"--table" must match/);
    expect(await fixture.query('SELECT id FROM victim')).toEqual([{ id: 1 }]);
  }, 60_000);
});

describe('finding 2: the exported DDL refuses an unchecked schema', () => {
  test.each([
    ['postgresSchemaSql', postgresSchemaSql],
    ['sqliteSchemaSql', sqliteSchemaSql],
  ])('%s', async (_name, schemaSql) => {
    await expectCode(
      () => schemaSql({ schema: 'x"; DROP TABLE victim; --' }),
      'INVALID_IDENTIFIER',
      /schema/,
    );
    await expectCode(() => schemaSql({ table: 'x"; DROP TABLE victim; --' }), 'INVALID_IDENTIFIER', /table/);
    expect(schemaSql({ schema: 'app' })).toContain('"app"."outboxer_messages"');
  });
});

describe.each(fixtures)('findings 3, 5, 6 and 7 on $name', ({ make }) => {
  let fixture: Fixture;
  let outboxer: Outboxer<never, boolean>;
  let shared: () => unknown = () => undefined;

  beforeAll(async () => {
    fixture = await make();
    outboxer = new Outboxer({
      database: fixture.database,
      testing: 'manual',
      publishHeaders: () => shared() as Record<string, string>,
      outboxes: { orders: { relay: functionRelay(async () => undefined), retention: { keep: 60 } } },
    }) as Outboxer<never, boolean>;
    await outboxer.migrate();
    await fixture.query('CREATE TABLE business (id INTEGER PRIMARY KEY)');
  }, 120_000);
  afterAll(() => fixture.close());

  let business = 0;
  /** Publishes inside a transaction that also writes a business row, which must commit. */
  async function publishing(publish: (tx: never) => unknown): Promise<unknown> {
    const id = ++business;
    const before = (await outboxer.counts('orders')).pending;
    let error: unknown;
    const f = fixture;
    if (f.kind === 'sqlite') {
      f.db.transaction(() => {
        f.db.prepare('INSERT INTO business (id) VALUES (?)').run(id);
        error = catchSync(() => publish(f.db as never));
      })();
    } else {
      await f.transaction(async (tx) => {
        await tx.query('INSERT INTO business (id) VALUES ($1)', [id]);
        error = await thrown(() => publish(tx as never));
        await tx.query('SELECT 1');
      });
    }
    expect(await fixture.query(`SELECT id FROM business WHERE id = ${id}`)).toHaveLength(1);
    expect((await outboxer.counts('orders')).pending, 'nothing was written').toBe(before);
    return error;
  }

  async function refused(publish: (tx: never) => unknown, code: ErrorCode, message?: RegExp) {
    await expectCode(() => publishing(publish).then((e) => Promise.reject(e)), code, message);
  }

  test('3: reserved header names, in any case, are refused at publish', async () => {
    for (const headers of [
      { 'OUTBOXER-ID': '999999', 'outboxer-type': 'admin.delete' } as Record<string, string>,
      { 'Outboxer-Group-Key': 'x' },
      { 'outboxer-headers': '{}' },
    ]) {
      await refused(
        (tx) => outboxer.publish(tx, 'orders', { a: 1 }, { headers }),
        'INVALID_MESSAGE',
        /reserved/,
      );
    }
    shared = () => ({ 'outboxer-id': '1' });
    await refused((tx) => outboxer.publish(tx, 'orders', { a: 1 }), 'INVALID_MESSAGE', /reserved/);
    shared = () => undefined;
  });

  test('5: publishMany over 10,000 messages, or over 64 MiB encoded, is refused before encoding', async () => {
    const many = Array.from({ length: 10_001 }, (_, i): PublishInput => ({ outbox: 'orders', payload: i }));
    await refused((tx) => outboxer.publishMany(tx, many), 'BATCH_TOO_LARGE', /10000/);
    const big = 'x'.repeat(200_000);
    const heavy = Array.from({ length: 340 }, (): PublishInput => ({ outbox: 'orders', payload: big }));
    await refused((tx) => outboxer.publishMany(tx, heavy), 'BATCH_TOO_LARGE', /64 MiB/);
  });

  test('5: listings, ids and retention are bounded, with typed errors', async () => {
    for (const limit of [1e9, 1e300, 2 ** 63, 10_001, 0, 1.5, NaN, '10'])
      for (const list of [
        () => outboxer.listPending('orders', { limit: limit as number }),
        () => outboxer.listDead('orders', { limit: limit as number }),
        () => outboxer.blockedGroups('orders', { limit: limit as number }),
      ])
        await expectCode(list, 'INVALID_OPTIONS', /"limit" must be an integer from 1 to 10000/);
    const ids = Array.from({ length: 10_001 }, (_, i) => i + 1);
    await expectCode(() => outboxer.retryDead('orders', { ids }), 'INVALID_OPTIONS', /at most 10000/);
    await expectCode(() => outboxer.discard('orders', ids), 'INVALID_OPTIONS', /at most 10000/);
    for (const keep of [1e12, Infinity, -1])
      await expectCode(
        () =>
          new Outboxer({
            database: fixture.database,
            relay: false,
            outboxes: { o: { retention: { keep } } },
          }),
        'INVALID_OPTIONS',
        /retention\.keep/,
      );
    expect(await outboxer.prune('orders')).toBe(0);
  });

  test('6: headers that are not a plain object are refused, not spread or dropped', async () => {
    shared = () => ({ tenant: 't1' });
    for (const headers of ['abc', ['a', 'b'], new Map([['a', 'b']]), new globalThis.Headers({ a: 'b' })]) {
      await refused(
        (tx) => outboxer.publish(tx, 'orders', { a: 1 }, { headers: headers as never }),
        'INVALID_MESSAGE',
        /plain object/,
      );
    }
    shared = () => 'not headers';
    await refused((tx) => outboxer.publish(tx, 'orders', { a: 1 }), 'INVALID_MESSAGE', /publishHeaders/);
    shared = () => {
      throw 'a string, not an Error';
    };
    await refused(
      (tx) => outboxer.publish(tx, 'orders', { a: 1 }),
      'INVALID_MESSAGE',
      /a string, not an Error/,
    );
    shared = () => undefined;
  });

  test('6: values JSON would lose are refused; what JSON keeps is delivered as JSON gives it', async () => {
    for (const payload of [
      NaN,
      { n: Infinity },
      [-Infinity],
      { m: new Map([[1, 2]]) },
      new Set([1]),
      new Error('e'),
    ])
      await refused((tx) => outboxer.publish(tx, 'orders', payload), 'PAYLOAD_NOT_ENCODABLE', /lose/);
    const kept = { date: new Date(0), gap: [1, undefined, 3], zero: -0, none: null, dropped: undefined };
    const id = await publishOk((tx) => outboxer.publish(tx, 'orders', kept));
    const [stored] = (await outboxer.listPending('orders', { limit: 10_000 })).filter((m) => m.id === id);
    expect(stored!.payload).toEqual({
      date: '1970-01-01T00:00:00.000Z',
      gap: [1, null, 3],
      zero: 0,
      none: null,
    });
  });

  test('6: whatever the input throws while it is read is a typed error, and nothing is written', async () => {
    const toJsonThrows = {
      toJSON() {
        throw 42;
      },
    };
    await refused((tx) => outboxer.publish(tx, 'orders', toJsonThrows), 'PAYLOAD_NOT_ENCODABLE', /42/);
    const getter = Object.defineProperty({}, 'h', {
      enumerable: true,
      get() {
        throw new Error('getter says no');
      },
    });
    await refused(
      (tx) => outboxer.publish(tx, 'orders', 1, { headers: getter }),
      'INVALID_MESSAGE',
      /getter says no/,
    );
    const proxy = new Proxy(
      {},
      {
        ownKeys() {
          throw Symbol('trap');
        },
      },
    );
    await refused((tx) => outboxer.publish(tx, 'orders', 1, { headers: proxy }), 'INVALID_MESSAGE');
    const input = Object.defineProperty({ outbox: 'orders' }, 'payload', {
      get() {
        throw undefined;
      },
    }) as PublishInput;
    await refused((tx) => outboxer.publishMany(tx, [input]), 'INVALID_MESSAGE');
  });

  test('7: CR, LF or NUL in a header, and names no relay can send, are refused at publish', async () => {
    for (const headers of [
      { a: 'x\r\ny: z' } as Record<string, string>,
      { a: 'x\ny' },
      { a: 'x\0y' },
      { 'a\r\nb': 'x' },
      { 'a b': 'x' },
      { 'a:b': 'x' },
      { '': 'x' },
    ])
      await refused((tx) => outboxer.publish(tx, 'orders', 1, { headers }), 'INVALID_MESSAGE', /header/);
    await refused(
      (tx) => outboxer.publish(tx, 'orders', 1, { headers: { ['n'.repeat(257)]: 'x' } }),
      'INVALID_MESSAGE',
      /1 to 255 bytes/,
    );
  });

  async function publishOk(publish: (tx: never) => unknown): Promise<number> {
    let id: unknown;
    const f = fixture;
    if (f.kind === 'sqlite') f.db.transaction(() => (id = publish(f.db as never)))();
    else await f.transaction(async (tx) => (id = await (publish(tx as never) as Promise<number>)));
    expect(typeof id).toBe('number');
    return id as number;
  }

  test('3: a stored row that claims outboxer-id cannot make the webhook relay send it', async () => {
    const receiver = await startReceiver();
    try {
      const webhook = new Outboxer({
        database: fixture.database,
        testing: 'manual',
        outboxes: { hooks: { relay: webhookRelay({ url: receiver.url }), table: 'hooks' } },
      });
      await webhook.migrate();
      // Written by hand, as a row from before publish checked the namespace would be.
      await fixture.query(
        `INSERT INTO hooks (outbox, partition, payload, headers) VALUES ('hooks', 0, '1', '{"OUTBOXER-ID":"999999","outboxer-type":"admin.delete","x-own":"kept"}')`,
      );
      const [row] = await fixture.query('SELECT id FROM hooks');
      await webhook.drain('hooks');
      expect(receiver.requests).toHaveLength(1);
      const { headers } = receiver.requests[0]!;
      expect(headers['outboxer-id']).toBe(String(row!.id));
      expect(headers['outboxer-type']).toBeUndefined();
      expect(headers['x-own']).toBe('kept');
    } finally {
      await receiver.close();
    }
  });
});

function catchSync(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('finding 5 on the command line', () => {
  let dir: string;
  beforeAll(() => void (dir = mkdtempSync(join(tmpdir(), 'outboxer-limits-'))));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('--older-than past 100 years and --limit past 10,000 are usage errors', async () => {
    const url = `sqlite:${join(dir, 'app.db')}`;
    const prune = await cli(['prune', '--older-than', '1000000000000', '--yes'], url);
    expect(prune.code).toBe(2);
    expect(prune.stderr).toMatch(/--older-than must be at most/);
    const pending = await cli(['pending', '--limit', '10001'], url);
    expect(pending.code).toBe(2);
    expect(pending.stderr).toMatch(/--limit must be an integer from 1 to 10000/);
  }, 60_000);
});
