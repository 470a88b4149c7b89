/**
 * The inbox's deduplication on each database: a message id is handled once, the record and the
 * handler's effect commit together or not at all (a throwing handler leaves neither, even when the
 * caller commits anyway), duplicates say so, expired ids are pruned, and bad input writes nothing.
 */
import diagnostics from 'node:diagnostics_channel';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, isOutboxerError, type InboxMessage } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import {
  fixtures,
  mariadbFixture,
  postgresFixture,
  sqliteFixture,
  type Fixture,
} from '../support/databases.js';
import { receive, type AnyOutboxer } from '../support/inbox.js';
import { waitUntil } from '../support/random.js';

describe.each(fixtures)('the inbox on $name', ({ make }) => {
  let fixture: Fixture;
  let outboxer: AnyOutboxer;
  const effects = async () =>
    (await fixture.query('SELECT effect FROM effects ORDER BY effect')).map((row) => row.effect);
  const recorded = async () =>
    Number((await fixture.query('SELECT count(*) AS n FROM consumer_inbox'))[0]!.n);

  beforeAll(async () => {
    fixture = await make();
    outboxer = new Outboxer({
      database: fixture.database,
      inboxes: { payments: { table: 'consumer_inbox' }, refunds: { table: 'consumer_inbox' } },
    }) as AnyOutboxer;
    await outboxer.migrate();
    await fixture.query('CREATE TABLE effects (effect TEXT NOT NULL)');
  });
  afterAll(() => fixture.close());

  test('a message is handled once; its duplicate does not call the handler and says when it was handled', async () => {
    const first = await receive(fixture, outboxer, { id: 'evt-1', source: 'billing' }, 'charge 1');
    const again = await receive(fixture, outboxer, { id: 'evt-1', source: 'billing' }, 'charge 1 again');
    expect(first).toEqual({ duplicate: false, value: 'charge 1' });
    expect(again.duplicate).toBe(true);
    expect(again.duplicate && again.handledAt.getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect(await effects()).toEqual(['charge 1']);
  });

  test('ids are unique per source and per inbox, and a number id is the same message as its text', async () => {
    await receive(fixture, outboxer, { id: 7, source: 'a' }, 'a7');
    await receive(fixture, outboxer, { id: 7, source: 'b' }, 'b7');
    await receive(fixture, outboxer, { id: 7, source: 'a' }, 'a7 refund', { inbox: 'refunds' });
    expect((await receive(fixture, outboxer, { id: '7', source: 'a' }, 'again')).duplicate).toBe(true);
    expect(await effects()).toEqual(expect.arrayContaining(['a7', 'b7', 'a7 refund']));
    expect(await effects()).not.toContain('again');
  });

  test('a handler that throws leaves neither its effect nor the record, even when the caller commits', async () => {
    await expect(receive(fixture, outboxer, { id: 'evt-fail' }, 'partial', { fail: true })).rejects.toThrow(
      'handler failed',
    );
    await receive(fixture, outboxer, { id: 'evt-fail' }, 'swallowed', { fail: true, swallow: true });
    expect(await effects()).not.toContain('partial');
    expect(await effects()).not.toContain('swallowed');
    // Redelivered, it is handled.
    expect(await receive(fixture, outboxer, { id: 'evt-fail' }, 'done')).toEqual({
      duplicate: false,
      value: 'done',
    });
  });

  test("the caller's rollback takes the record with it: the redelivery is handled", async () => {
    await receive(fixture, outboxer, { id: 'evt-rolled-back' }, 'rolled back', { rollback: true });
    expect(await effects()).not.toContain('rolled back');
    expect((await receive(fixture, outboxer, { id: 'evt-rolled-back' }, 'kept')).duplicate).toBe(false);
  });

  test('telemetry reports handled messages and duplicates', async () => {
    const seen: Array<[string, unknown]> = [];
    const handled = (event: unknown) => seen.push(['handled', event]);
    const duplicate = (event: unknown) => seen.push(['duplicate', event]);
    diagnostics.subscribe('outboxer:inbox:handled', handled);
    diagnostics.subscribe('outboxer:inbox:duplicate', duplicate);
    try {
      await receive(fixture, outboxer, { id: 'evt-seen', source: 's' }, 'seen');
      await receive(fixture, outboxer, { id: 'evt-seen', source: 's' }, 'seen');
    } finally {
      diagnostics.unsubscribe('outboxer:inbox:handled', handled);
      diagnostics.unsubscribe('outboxer:inbox:duplicate', duplicate);
    }
    expect(seen).toEqual([
      ['handled', expect.objectContaining({ inbox: 'payments', source: 's', id: 'evt-seen' })],
      ['duplicate', expect.objectContaining({ inbox: 'payments', source: 's', id: 'evt-seen' })],
    ]);
  });

  test('pruning forgets ids past the retention: a duplicate after it is handled again', async () => {
    const shortLived = new Outboxer({
      database: fixture.database,
      inboxes: { payments: { table: 'consumer_inbox', retention: { keep: 3600 } } },
    }) as AnyOutboxer;
    await receive(fixture, shortLived, { id: 'evt-old' }, 'old');
    expect(await shortLived.inbox('payments').prune()).toBe(0); // handled seconds ago, kept an hour
    const before = await recorded();
    // Two hours later, by the clock prune() is given.
    const pruned = await shortLived.inbox('payments').prune(Date.now() + 7_200_000);
    expect(pruned).toBeGreaterThan(0);
    expect(await recorded()).toBe(before - pruned);
    expect((await receive(fixture, shortLived, { id: 'evt-old' }, 'old again')).duplicate).toBe(false);
  });

  test('bad input gets typed errors and writes nothing', async () => {
    const before = await recorded();
    const refuse = async (message: unknown, code: string, pattern: RegExp, handler: unknown = () => 'x') => {
      const error: unknown = await (async () => {
        if (fixture.kind === 'sqlite') {
          return fixture.transaction((db) => {
            try {
              outboxer.inbox('payments').handle(db as never, message as InboxMessage, handler as never);
            } catch (thrown) {
              return thrown;
            }
            return undefined;
          });
        }
        return fixture.transaction((client) =>
          Promise.resolve(
            outboxer.inbox('payments').handle(client as never, message as InboxMessage, handler as never),
          ).then(
            () => undefined,
            (thrown: unknown) => thrown,
          ),
        );
      })();
      expect(isOutboxerError(error) && error.code, String(error)).toBe(code);
      expect((error as Error).message).toMatch(pattern);
    };
    await refuse({ source: 'x' }, 'INVALID_MESSAGE', /id must be a non-empty string or a safe integer/);
    await refuse({ id: '' }, 'INVALID_MESSAGE', /id must be/);
    await refuse({ id: 1.5 }, 'INVALID_MESSAGE', /id must be/);
    await refuse({ id: { nested: 1 } }, 'INVALID_MESSAGE', /id must be/);
    await refuse({ id: 'x'.repeat(401) }, 'INVALID_MESSAGE', /id is longer than 400 characters/);
    await refuse({ id: 'ok', source: 's'.repeat(256) }, 'INVALID_MESSAGE', /source is longer than 255/);
    await refuse({ id: 'a\0b' }, 'INVALID_MESSAGE', /NUL/);
    await refuse({ id: 'ok', source: 5 }, 'INVALID_MESSAGE', /source must be a string/);
    await refuse({ id: 'ok', groupKey: '' }, 'INVALID_MESSAGE', /groupKey/);
    await refuse(null, 'INVALID_MESSAGE', /must be an object/);
    await refuse({ id: 'ok' }, 'INVALID_MESSAGE', /handler must be a function/, 'not a function');
    expect(() => outboxer.inbox('orders')).toThrow(expect.objectContaining({ code: 'UNKNOWN_INBOX' }));
    expect(await recorded()).toBe(before);
  });

  test('an inbox whose table migrate() did not create reports SCHEMA_MISSING, and the transaction goes on', async () => {
    const unmigrated = new Outboxer({
      database: fixture.database,
      inboxes: { payments: { table: 'never_migrated' } },
    }) as AnyOutboxer;
    await expect(receive(fixture, unmigrated, { id: 'evt-x' }, 'x')).rejects.toMatchObject({
      code: 'SCHEMA_MISSING',
    });
    expect(await effects()).not.toContain('x');
  });
});

describe('inbox options', () => {
  const database = fixtures[0]!;
  test.each([
    [{ payments: { retention: { keep: -1 } } }, 'INVALID_OPTIONS', /inboxes\.payments\.retention\.keep/],
    [{ payments: { retention: 'delete' } }, 'INVALID_OPTIONS', /inboxes\.payments\.retention/],
    [{ payments: { colour: 'blue' } }, 'INVALID_OPTIONS', /Unknown option "inboxes\.payments\.colour"/],
    [{ payments: { pruneInterval: 5 } }, 'INVALID_OPTIONS', /inboxes\.payments\.pruneInterval/],
    [{ payments: { table: 'x; DROP TABLE y' } }, 'INVALID_IDENTIFIER', /inboxes\.payments\.table/],
    [{ 'bad name': {} }, 'INVALID_IDENTIFIER', /inbox name/],
    ['payments', 'INVALID_OPTIONS', /inboxes/],
  ])('%j', async (inboxes, code, message) => {
    const fixture = await database.make();
    try {
      expect(() => new Outboxer({ database: fixture.database, inboxes: inboxes as never })).toThrow(
        expect.objectContaining({ code, message: expect.stringMatching(message) }),
      );
    } finally {
      await fixture.close();
    }
  });

  test('a consumer with inboxes only needs no outbox, and starts and stops', async () => {
    const fixture = await database.make();
    try {
      const consumer = new Outboxer({ database: fixture.database, inboxes: { payments: {} } });
      await consumer.migrate();
      await consumer.start();
      await consumer.stop();
      expect(() => new Outboxer({ database: fixture.database, outboxes: {} })).toThrow(/at least one outbox/);
    } finally {
      await fixture.close();
    }
  });
});

describe('the inbox under concurrent redelivery on Postgres', () => {
  test('two transactions handling the same message at once: the second waits, then sees a duplicate', async () => {
    const fixture = await postgresFixture();
    try {
      const outboxer = new Outboxer({ database: nodePostgres(fixture.pool), inboxes: { payments: {} } });
      await outboxer.migrate();
      await fixture.query('CREATE TABLE effects (effect TEXT NOT NULL)');
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let firstRunning!: () => void;
      const running = new Promise<void>((resolve) => (firstRunning = resolve));
      const first = fixture.transaction((client) =>
        outboxer.inbox('payments').handle(client, { id: 'evt-race' }, async () => {
          await client.query(`INSERT INTO effects VALUES ('first')`);
          firstRunning();
          await released;
          return 'first';
        }),
      );
      await running;
      const second = fixture.transaction((client) =>
        outboxer.inbox('payments').handle(client, { id: 'evt-race' }, async () => {
          await client.query(`INSERT INTO effects VALUES ('second')`);
          return 'second';
        }),
      );
      // The second transaction's INSERT waits on the first's uncommitted key.
      await waitUntil(
        async () =>
          (
            await fixture.query(
              `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
              [fixture.schema],
            )
          )[0]!.n === 1,
        20_000,
        'the second transaction waiting on the first',
      );
      release();
      expect(await first).toEqual({ duplicate: false, value: 'first' });
      expect((await second).duplicate).toBe(true);
      expect(await fixture.query('SELECT effect FROM effects')).toEqual([{ effect: 'first' }]);
    } finally {
      await fixture.close();
    }
  });
});

describe('the inbox under concurrent redelivery on MariaDB', () => {
  test('two transactions handling the same message at once: the second waits, then sees a duplicate', async () => {
    const fixture = await mariadbFixture();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const transactions: Promise<unknown>[] = [];
    try {
      const outboxer = new Outboxer({ database: fixture.database, inboxes: { payments: {} } });
      await outboxer.migrate();
      await fixture.query('CREATE TABLE effects (effect TEXT NOT NULL)');
      let firstRunning!: () => void;
      const running = new Promise<void>((resolve) => (firstRunning = resolve));
      const first = fixture.transaction(async (connection) =>
        outboxer.inbox('payments').handle(connection as never, { id: 'evt-race' }, async () => {
          await connection.query(`INSERT INTO effects VALUES ('first')`);
          firstRunning();
          await released;
          return 'first';
        }),
      );
      transactions.push(first);
      await running;
      const second = fixture.transaction(async (connection) =>
        outboxer.inbox('payments').handle(connection as never, { id: 'evt-race' }, async () => {
          await connection.query(`INSERT INTO effects VALUES ('second')`);
          return 'second';
        }),
      );
      transactions.push(second);
      // The second transaction's INSERT waits on the first's uncommitted key (INNODB_TRX does not
      // always list a transaction waiting on a duplicate-key check: the process list does).
      await waitUntil(
        async () =>
          Number(
            (
              await fixture.query(
                `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND COMMAND = 'Query' AND INFO LIKE 'INSERT INTO %outboxer_inbox%' AND TIME_MS > 200`,
                [fixture.schema],
              )
            )[0]!.n,
          ) === 1,
        20_000,
        'the second transaction waiting on the first',
      ).catch(async (e) => {
        console.log(
          await fixture.query(
            'SELECT t.trx_state, t.trx_mysql_thread_id, p.DB, p.STATE, p.INFO FROM information_schema.INNODB_TRX t LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id',
          ),
        );
        console.log(
          await fixture.query('SELECT ID, DB, STATE, INFO FROM information_schema.PROCESSLIST WHERE DB = ?', [
            fixture.schema,
          ]),
        );
        throw e;
      });
      release();
      expect(await first).toEqual({ duplicate: false, value: 'first' });
      expect((await second).duplicate).toBe(true);
      expect(await fixture.query('SELECT effect FROM effects')).toEqual([{ effect: 'first' }]);
    } finally {
      // A failed wait must not leave the first transaction open: DROP DATABASE would wait for it.
      release();
      await Promise.allSettled(transactions);
      await fixture.close();
    }
  });
});

describe('the inbox on a synchronous database', () => {
  test('a handler that returns a promise is refused with INVALID_STATE, and nothing is recorded', async () => {
    const fixture = sqliteFixture();
    try {
      const outboxer = new Outboxer({ database: betterSqlite3(fixture.db), inboxes: { payments: {} } });
      await outboxer.migrate();
      const outcome = fixture.db.transaction(() => {
        try {
          outboxer.inbox('payments').handle(fixture.db, { id: 'evt-async' }, (async () => 'x') as never);
        } catch (error) {
          return error;
        }
        return undefined;
      })();
      expect(outcome).toMatchObject({ code: 'INVALID_STATE', message: expect.stringMatching(/synchronous/) });
      expect(await fixture.query('SELECT count(*) AS n FROM outboxer_inbox')).toEqual([{ n: 0 }]);
    } finally {
      await fixture.close();
    }
  });
});

describe('an error inside handle on Postgres', () => {
  test('SCHEMA_MISSING leaves the caller’s transaction usable: its other writes commit', async () => {
    const fixture = await postgresFixture();
    try {
      const outboxer = new Outboxer({ database: nodePostgres(fixture.pool), inboxes: { payments: {} } });
      await fixture.query('CREATE TABLE effects (effect TEXT NOT NULL)');
      await fixture.transaction(async (client) => {
        await expect(
          outboxer.inbox('payments').handle(client, { id: 'evt-1' }, async () => 'x'),
        ).rejects.toMatchObject({ code: 'SCHEMA_MISSING' });
        await client.query(`INSERT INTO effects VALUES ('after the error')`);
      });
      expect(await fixture.query('SELECT effect FROM effects')).toEqual([{ effect: 'after the error' }]);
    } finally {
      await fixture.close();
    }
  });

  test('a handler whose statement fails: its error comes out, and the transaction goes on without it', async () => {
    const fixture = await postgresFixture();
    try {
      const outboxer = new Outboxer({ database: nodePostgres(fixture.pool), inboxes: { payments: {} } });
      await outboxer.migrate();
      await fixture.query('CREATE TABLE effects (effect TEXT PRIMARY KEY)');
      await fixture.query(`INSERT INTO effects VALUES ('taken')`);
      await fixture.transaction(async (client) => {
        await expect(
          outboxer.inbox('payments').handle(client, { id: 'evt-2' }, async () => {
            await client.query(`INSERT INTO effects VALUES ('mine')`);
            await client.query(`INSERT INTO effects VALUES ('taken')`); // a unique violation
          }),
        ).rejects.toMatchObject({ code: '23505' });
        await client.query(`INSERT INTO effects VALUES ('after the error')`);
      });
      expect(await fixture.query('SELECT effect FROM effects ORDER BY effect')).toEqual([
        { effect: 'after the error' },
        { effect: 'taken' },
      ]);
      expect(await fixture.query('SELECT count(*)::int AS n FROM outboxer_inbox')).toEqual([{ n: 0 }]);
    } finally {
      await fixture.close();
    }
  });
});
