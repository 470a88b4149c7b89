/**
 * Bad input gets a typed error with a stable code, thrown before any SQL runs, and the caller's
 * transaction is left as it was: it still commits what it did before.
 */
import diagnostics from 'node:diagnostics_channel';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay, isOutboxerError, type ErrorCode } from 'outboxer';
import { fixtures, postgresFixture, sqliteFixture, type Fixture } from '../support/databases.js';

/** Expects `fn` to throw (sync adapters) or reject (async adapters) with an OutboxerError of `code`. */
async function expectCode(fn: () => unknown, code: ErrorCode, message?: RegExp): Promise<void> {
  let thrown: unknown;
  try {
    await fn();
  } catch (error) {
    thrown = error;
  }
  expect(isOutboxerError(thrown), `expected an OutboxerError ${code}, got ${String(thrown)}`).toBe(true);
  expect((thrown as { code: string }).code).toBe(code);
  if (message) expect((thrown as Error).message).toMatch(message);
}

const relay = functionRelay(async () => undefined);

describe('invalid options are refused at construction, naming the option and the accepted values', () => {
  const { database } = sqliteFixture();
  const make =
    (options: Record<string, unknown>, outbox: Record<string, unknown> = {}) =>
    () =>
      new Outboxer({ database, outboxes: { orders: { relay, ...outbox } }, ...options } as never);

  test.each([
    [{}, { ordering: 'random' }, /outboxes\.orders\.ordering.*'group', 'total', 'none'/],
    [{}, { partitions: 0 }, /outboxes\.orders\.partitions.*integer from 1 to 1024/],
    [{}, { partitions: 1.5 }, /outboxes\.orders\.partitions/],
    [{}, { ordering: 'total', partitions: 4 }, /partitions.*'total'/],
    [{}, { batchSize: -1 }, /outboxes\.orders\.batchSize/],
    [{}, { pollInterval: '1s' }, /outboxes\.orders\.pollInterval/],
    [{}, { maxAttempts: 0 }, /outboxes\.orders\.maxAttempts/],
    [{}, { backoff: { min: 100, max: 10 } }, /outboxes\.orders\.backoff\.max.*at least backoff\.min/],
    [{}, { backoff: { minimum: 1 } }, /Unknown option "outboxes\.orders\.backoff\.minimum"/],
    [{}, { retention: 'forever' }, /outboxes\.orders\.retention.*'delete' or \{ keep: seconds \}/],
    [{}, { retention: { keep: -1 } }, /retention\.keep/],
    [{}, { recountInterval: 10 }, /outboxes\.orders\.recountInterval.*integer from 1000/],
    [{}, { relay: { send() {} } }, /outboxes\.orders\.relay/],
    [{}, { notify: true }, /notify.*sqlite/],
    [{}, { colour: 'blue' }, /Unknown option "outboxes\.orders\.colour"/],
    [{ relay: 'yes' }, {}, /Option "relay" must be true or false/],
    [{ testing: 'auto' }, {}, /Option "testing" must be one of 'manual'/],
    [{ leaseTimeout: 5 }, {}, /leaseTimeout/],
    [{ nodeId: 'pod 0; DROP' }, {}, /Option "nodeId" must be 1 to 128 letters/],
    [{ nodeId: '' }, {}, /nodeId/],
    [{ nodeId: 42 }, {}, /nodeId/],
    [{ logger: 'console' }, {}, /logger/],
    [{ verbose: true }, {}, /Unknown option "verbose"/],
  ])('%j %j', (options, outbox, message) => {
    return expectCode(make(options, outbox), 'INVALID_OPTIONS', message);
  });

  test('an outbox without a relay on a relaying instance', async () => {
    await expectCode(
      () => new Outboxer({ database, outboxes: { orders: {} } }),
      'INVALID_OPTIONS',
      /outboxes\.orders\.relay.*relay: false/,
    );
  });

  test('no outboxes, or no database adapter', async () => {
    await expectCode(() => new Outboxer({ database, outboxes: {} }), 'INVALID_OPTIONS', /outboxes/);
    await expectCode(
      () => new Outboxer({ database: {} as never, outboxes: { orders: { relay } } }),
      'INVALID_OPTIONS',
      /database/,
    );
  });

  test.each([
    ['orders; DROP TABLE users', /table/],
    ['a.b.c', /table/],
    ['1abc', /table/],
    ['x'.repeat(49), /table/],
    ['public."quoted"', /table/],
  ])('an unsafe table name %j', async (table, message) => {
    await expectCode(make({}, { table }), 'INVALID_IDENTIFIER', message);
  });

  test('unsafe schema and instance names', async () => {
    await expectCode(make({ schema: 'bad-schema' }), 'INVALID_IDENTIFIER', /schema/);
    await expectCode(make({ name: 'a:b' }), 'INVALID_IDENTIFIER', /name/);
    await expectCode(
      () => new Outboxer({ database, outboxes: { 'bad name': { relay } } }),
      'INVALID_IDENTIFIER',
      /outbox name/,
    );
  });
});

describe.each(fixtures)('bad messages on $name', ({ make }) => {
  let fixture: Fixture;
  let outboxer: Outboxer<never, boolean>;
  beforeAll(async () => {
    fixture = await make();
    outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { orders: { relay, maxPayloadBytes: 1000 } },
      testing: 'manual',
    }) as Outboxer<never, boolean>;
    await outboxer.migrate();
    await fixture.query('CREATE TABLE business (id INTEGER PRIMARY KEY)');
  });
  afterAll(() => fixture.close());
  // A const per test, so TypeScript narrows the fixture by its kind.
  const current = (): Fixture => fixture;

  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  const cases: Array<[string, () => [string, unknown, object?], ErrorCode]> = [
    ['an unknown outbox', () => ['payments', {}], 'UNKNOWN_OUTBOX'],
    ['a BigInt payload', () => ['orders', { amount: 10n }], 'PAYLOAD_NOT_ENCODABLE'],
    ['a cyclic payload', () => ['orders', cyclic], 'PAYLOAD_NOT_ENCODABLE'],
    ['an undefined payload', () => ['orders', undefined], 'PAYLOAD_NOT_ENCODABLE'],
    ['a payload over maxPayloadBytes', () => ['orders', { text: 'x'.repeat(2000) }], 'PAYLOAD_TOO_LARGE'],
    ['an empty group key', () => ['orders', {}, { groupKey: '' }], 'INVALID_MESSAGE'],
    ['a numeric group key', () => ['orders', {}, { groupKey: 42 }], 'INVALID_MESSAGE'],
    ['a huge group key', () => ['orders', {}, { groupKey: 'k'.repeat(600) }], 'INVALID_MESSAGE'],
    ['a group key with a lone surrogate', () => ['orders', {}, { groupKey: 'a\uD800b' }], 'INVALID_MESSAGE'],
    ['a non-string header', () => ['orders', {}, { headers: { retries: 3 } }], 'INVALID_MESSAGE'],
  ];

  test.each(cases)(
    '%s: typed error, nothing written, the transaction still commits',
    async (_name, args, code) => {
      const fixture = current();
      const before = await outboxer.counts('orders');
      const id = Math.floor(Math.random() * 1e9);
      if (fixture.kind === 'sqlite') {
        let thrown: unknown;
        fixture.db.transaction(() => {
          fixture.db.prepare('INSERT INTO business (id) VALUES (?)').run(id);
          const [outbox, payload, options] = args();
          try {
            outboxer.publish(fixture.db as never, outbox, payload, options);
          } catch (error) {
            thrown = error;
          }
        })();
        await expectCode(() => {
          throw thrown;
        }, code);
      } else if (fixture.kind === 'mysql') {
        await fixture.transaction(async (tx) => {
          await tx.query('INSERT INTO business (id) VALUES (?)', [id]);
          const [outbox, payload, options] = args();
          await expectCode(() => outboxer.publish(tx as never, outbox, payload, options), code);
          await tx.query('SELECT 1');
        });
      } else {
        await fixture.transaction(async (tx) => {
          await tx.query('INSERT INTO business (id) VALUES ($1)', [id]);
          const [outbox, payload, options] = args();
          await expectCode(() => outboxer.publish(tx as never, outbox, payload, options), code);
          // The transaction is not aborted: another statement still works.
          await tx.query('SELECT 1');
        });
      }
      expect(await fixture.query('SELECT id FROM business WHERE id = ' + String(id))).toHaveLength(1);
      expect(await outboxer.counts('orders')).toEqual(before);
    },
  );

  test('a payload and group key with NUL characters and unicode', async () => {
    const fixture = current();
    // SQLite and MySQL keep NUL in text; Postgres refuses it.
    const key = fixture.kind === 'postgres' ? 'ключ🔑' : 'ключ\u0000🔑';
    const payload = { text: 'nul \u0000 here, emoji 🎉, rtl \u202e' };
    if (fixture.kind === 'sqlite') {
      fixture.db.transaction(() =>
        outboxer.publish(fixture.db as never, 'orders', payload, { groupKey: key }),
      )();
    } else if (fixture.kind === 'mysql') {
      await fixture.transaction(
        (tx) => outboxer.publish(tx as never, 'orders', payload, { groupKey: key }) as Promise<number>,
      );
    } else {
      await fixture.transaction(
        (tx) => outboxer.publish(tx as never, 'orders', payload, { groupKey: key }) as Promise<number>,
      );
      // Postgres text cannot hold NUL: refused up front with a typed error.
      await fixture.transaction(async (tx) => {
        await expectCode(
          () => outboxer.publish(tx as never, 'orders', {}, { groupKey: 'a\u0000b' }),
          'INVALID_MESSAGE',
          /NUL/,
        );
      });
    }
    const [message] = await outboxer.listPending('orders');
    expect(message!.payload).toEqual(payload);
    expect(message!.groupKey).toBe(key);
    await outboxer.drain('orders');
  });

  test('publishing outside a transaction is refused', async () => {
    const fixture = current();
    if (fixture.kind === 'sqlite') {
      await expectCode(() => outboxer.publish(fixture.db as never, 'orders', {}), 'NOT_IN_TRANSACTION');
    } else if (fixture.kind === 'mysql') {
      await expectCode(
        () => outboxer.publish(fixture.pool as never, 'orders', {}),
        'NOT_IN_TRANSACTION',
        /Pool/,
      );
      const connection = await fixture.pool.getConnection();
      try {
        // Autocommit, no transaction open: refused before anything is written.
        await expect(
          outboxer.publish(connection as never, 'orders', {}) as Promise<number>,
        ).rejects.toMatchObject({ code: 'NOT_IN_TRANSACTION' });
      } finally {
        connection.release();
      }
    } else {
      await expectCode(
        () => outboxer.publish(fixture.pool as never, 'orders', {}),
        'NOT_IN_TRANSACTION',
        /Pool/,
      );
      const client = await fixture.pool.connect();
      try {
        await expect(
          outboxer.publish(client as never, 'orders', {}) as Promise<number>,
        ).rejects.toMatchObject({ code: 'NOT_IN_TRANSACTION' });
      } finally {
        client.release();
      }
    }
    expect((await outboxer.counts('orders')).pending).toBe(0);
  });

  test('tables migrate() has not created: SCHEMA_MISSING naming what is missing, with the database error as cause', async () => {
    const fixture = current();
    const unmigrated = new Outboxer({
      database: fixture.database,
      outboxes: { orders: { relay, table: 'never_migrated' } },
      testing: 'manual',
    }) as Outboxer<never, boolean>;
    const publishing = () =>
      fixture.kind === 'sqlite'
        ? fixture.transaction((tx) => unmigrated.publish(tx as never, 'orders', {}) as number)
        : fixture.transaction((tx) => unmigrated.publish(tx as never, 'orders', {}) as Promise<number>);
    await expectCode(publishing, 'SCHEMA_MISSING', /never_migrated.*Run migrate\(\)/);
    await expectCode(() => unmigrated.counts('orders'), 'SCHEMA_MISSING', /never_migrated/);
    if (fixture.kind === 'postgres') {
      const relaying = new Outboxer({
        database: fixture.database,
        outboxes: { orders: { relay, table: 'never_migrated' } },
      });
      await expectCode(() => relaying.start(), 'SCHEMA_MISSING', /never_migrated_config/);
      await relaying.stop();
    }
    if (fixture.kind === 'postgres') {
      // A table from a version before tallies: publish names the missing companion.
      await unmigrated.migrate();
      await fixture.query('DROP TABLE never_migrated_tallies');
      await expectCode(publishing, 'SCHEMA_MISSING', /"never_migrated_tallies" does not exist/);
      await expectCode(() => unmigrated.counts('orders'), 'SCHEMA_MISSING', /never_migrated_tallies/);
    }
    await unmigrated.migrate();
    expect(await publishing()).toBeGreaterThan(0);
    expect((await unmigrated.counts('orders')).pending).toBe(1);
  });

  test('admin calls with bad arguments', async () => {
    await expect(outboxer.counts('nope')).rejects.toMatchObject({ code: 'UNKNOWN_OUTBOX' });
    await expect(outboxer.discard('orders', ['1'] as never)).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
    });
    await expect(outboxer.listPending('orders', { limit: 0 })).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
    });
    await expect(outboxer.drain('nope')).rejects.toMatchObject({ code: 'UNKNOWN_OUTBOX' });
  });
});

test('a relaying node on tables migrate() has not brought up to date reports SCHEMA_MISSING, naming what is missing', async () => {
  // Postgres only: SQLite keeps no tallies, the companion table this drops.
  const fixture = await postgresFixture();
  const table = 'stale_relay';
  const logged: string[] = [];
  const logger = {
    debug() {},
    info() {},
    warn() {},
    error: (_: string, fields?: { error?: string }) => void logged.push(String(fields?.error)),
  };
  const codes: unknown[] = [];
  const onError = (event: unknown) => codes.push((event as { error?: { code?: unknown } }).error?.code);
  diagnostics.subscribe('outboxer:error', onError);
  const outboxer = new Outboxer({
    database: fixture.database,
    outboxes: { orders: { relay, table, pollInterval: 20 } },
    leaseTimeout: 300,
    logger,
  });
  await outboxer.migrate();
  // Tables of a version before tallies, with a message published by an instance of that version.
  await fixture.query(`DROP TABLE ${table}_tallies`);
  await fixture.query(`INSERT INTO ${table} (outbox, partition, payload) VALUES ('orders', 0, '{}')`);
  await outboxer.start();
  try {
    const deadline = Date.now() + 10_000;
    while (!codes.includes('SCHEMA_MISSING') && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(codes).toContain('SCHEMA_MISSING');
    expect(logged[0]).toMatch(/"stale_relay_tallies" does not exist.*Run migrate\(\)/);
  } finally {
    diagnostics.unsubscribe('outboxer:error', onError);
    await outboxer.stop();
    await fixture.close();
  }
});

test('a schema-qualified table is created and used on Postgres', async () => {
  const fixture = await postgresFixture();
  try {
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { orders: { relay, table: `${fixture.schema}_extra.outbox` } },
      testing: 'manual',
    });
    await outboxer.migrate();
    await fixture.transaction(
      (tx) => outboxer.publish(tx as never, 'orders', { ok: true }) as Promise<number>,
    );
    const rows = await fixture.query(`SELECT count(*)::int AS n FROM "${fixture.schema}_extra"."outbox"`);
    expect(rows[0]!.n).toBe(1);
    await fixture.query(`DROP SCHEMA "${fixture.schema}_extra" CASCADE`);
  } finally {
    await fixture.close();
  }
});
