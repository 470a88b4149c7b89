/**
 * The behaviour suite of the data-layer adapters: every adapter runs it against a real database
 * (Postgres; SQLite as well where the library supports it). It publishes inside the library's own
 * transactions and checks what the relay side then sees, so both halves of an adapter (the
 * user's transaction and the adapter's own connection) are exercised together.
 *
 * An adapter's test file calls {@link adapterBehaviour} with a harness that opens the library on
 * the database the suite hands it (a fresh Postgres schema, or a fresh SQLite file).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  Outboxer,
  PermanentError,
  functionRelay,
  isOutboxerError,
  type DatabaseAdapter,
  type Envelope,
  type OutboxOptions,
  type SqlQuery,
} from 'outboxer';
import { DATABASE_URL, mariadbFixture, postgresFixture } from '../support/databases.js';
import { sleep, waitUntil } from '../support/random.js';

/** Where the harness opens its library: a Postgres schema (set it as the search path) or a SQLite file. */
export type Target =
  | {
      readonly kind: 'postgres';
      readonly url: string;
      readonly schema: string;
      readonly urlWithSchema: string;
    }
  | { readonly kind: 'sqlite'; readonly file: string }
  /** A fresh MariaDB database (`url` names it). */
  | { readonly kind: 'mysql'; readonly url: string; readonly database: string };

/** The library opened on the target, and an adapter over it. */
export interface Opened<Tx> {
  readonly database: DatabaseAdapter<Tx, boolean>;
  /**
   * Runs `fn` in a transaction of the library and commits; when `fn` throws (or rejects), the
   * library rolls back and the error comes out. For a synchronous library `fn` is synchronous.
   */
  transaction<T>(fn: (tx: Tx) => T | Promise<T>): Promise<T>;
  /** Runs `fn` in a transaction, then rolls it back with the library's own rollback API. */
  rollback(fn: (tx: Tx) => unknown): Promise<void>;
  /** Objects of the library that are not an open transaction (the root client, …): publish must refuse them. */
  readonly notTransactions: () => Record<string, unknown>;
  close(): Promise<void>;
}

export interface AdapterHarness<Tx> {
  readonly name: string;
  readonly dialect: 'postgres' | 'sqlite' | 'mysql';
  /** True when publish returns the id synchronously (better-sqlite3, Drizzle on better-sqlite3). */
  readonly sync: boolean;
  open(target: Target): Promise<Opened<Tx>>;
}

/** Checks on the tables behind the adapter's back, through a separate connection. */
interface Raw {
  count(table: string): Promise<number>;
  query(text: string, values?: unknown[]): Promise<Record<string, unknown>[]>;
  close(): Promise<void>;
}

class Rollback extends Error {}

/** Continues after a value that is a promise on async adapters and a plain value on sync ones. */
function andThen<T, U>(value: T | Promise<T>, fn: (value: T) => U): U | Promise<U> {
  return value instanceof Promise ? value.then(fn) : fn(value);
}

/** The adapter with every executeInTransaction recorded. */
function recording<Tx>(database: DatabaseAdapter<Tx, boolean>) {
  const statements: SqlQuery[] = [];
  const wrapped: DatabaseAdapter<Tx, boolean> = {
    ...database,
    executeInTransaction(tx, query) {
      statements.push(query);
      return database.executeInTransaction(tx, query);
    },
  };
  return { statements, database: wrapped };
}

const awkward = {
  text: `it's "quoted", a ? and $1, a \\ backslash, {braces}, NULL, ü €`,
  nested: { list: [1, null, 'two'], empty: {} },
  big: 12345678901234,
};

export function adapterBehaviour<Tx>(harness: AdapterHarness<Tx>): void {
  describe(`${harness.name} adapter behaviour`, () => {
    let target: Target;
    let raw: Raw;
    let opened: Opened<Tx>;
    let tables = 0;
    const table = () => `t${++tables}`;

    beforeAll(async () => {
      if (harness.dialect === 'postgres') {
        const fixture = await postgresFixture(4);
        const schema = fixture.schema;
        const url = DATABASE_URL;
        const separator = url.includes('?') ? '&' : '?';
        target = {
          kind: 'postgres',
          url,
          schema,
          urlWithSchema: `${url}${separator}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
        };
        raw = {
          count: async (t) =>
            Number((await fixture.query(`SELECT count(*)::int AS n FROM "${schema}"."${t}"`))[0]!.n),
          query: (text, values) => fixture.query(text, values),
          close: () => fixture.close(),
        };
      } else if (harness.dialect === 'mysql') {
        const fixture = await mariadbFixture(4);
        target = { kind: 'mysql', url: fixture.url, database: fixture.schema };
        raw = {
          count: async (t) => Number((await fixture.query(`SELECT count(*) AS n FROM "${t}"`))[0]!.n),
          query: (text, values) => fixture.query(text, values),
          close: () => fixture.close(),
        };
      } else {
        const dir = mkdtempSync(join(tmpdir(), 'outboxer-adapter-'));
        const file = join(dir, 'test.db');
        const db = new Database(file);
        db.pragma('journal_mode = WAL');
        target = { kind: 'sqlite', file };
        raw = {
          count: async (t) =>
            Number((db.prepare(`SELECT count(*) AS n FROM "${t}"`).get() as { n: number }).n),
          query: async (text, values = []) => db.prepare(text).all(...values) as Record<string, unknown>[],
          close: async () => {
            db.close();
            rmSync(dir, { recursive: true, force: true });
          },
        };
      }
      opened = await harness.open(target);
    });

    afterAll(async () => {
      await opened?.close();
      await raw?.close();
    });

    async function manual(
      options: Partial<OutboxOptions> & { relay: OutboxOptions['relay'] },
      database = opened.database,
    ) {
      const outboxer = new Outboxer({
        database,
        outboxes: { events: { table: table(), ...options } },
        testing: 'manual',
      });
      await outboxer.migrate();
      return outboxer;
    }

    const collect = () => {
      const delivered: Envelope[] = [];
      return { delivered, relay: functionRelay(async (m: Envelope) => void delivered.push(m)) };
    };

    test('a committed message is relayed, with its payload, group key, type and headers', async () => {
      const { delivered, relay } = collect();
      const outboxer = await manual({ relay });
      const published = await opened.transaction((tx) => {
        const id = outboxer.publish(tx, 'events', awkward, {
          groupKey: 'order:1',
          type: 'created',
          headers: { trace: 't-1' },
        });
        if (harness.sync) expect(typeof id).toBe('number');
        else expect(id).toBeInstanceOf(Promise);
        return id;
      });
      const result = await outboxer.drain();
      expect(result.delivered.map((m) => m.id)).toEqual([published]);
      expect(delivered).toHaveLength(1);
      const [message] = delivered;
      expect(message).toMatchObject({
        id: published,
        outbox: 'events',
        payload: awkward,
        groupKey: 'order:1',
        type: 'created',
        attempts: 0,
      });
      expect(message!.headers).toMatchObject({ trace: 't-1' });
      expect(message!.insertedAt).toBeInstanceOf(Date);
      expect(Number.isNaN(message!.insertedAt.getTime())).toBe(false);
      expect(await outboxer.counts('events')).toMatchObject({ pending: 0, delivered: 0, dead: 0 });
    });

    test('a rolled-back transaction relays nothing and leaves nothing in the table', async () => {
      const { delivered, relay } = collect();
      const outboxer = await manual({ relay });
      const name = outboxer.outbox('events').table.name;
      await opened.rollback((tx) => outboxer.publish(tx, 'events', { n: 1 }, { groupKey: 'g' }));
      expect((await outboxer.drain()).delivered).toEqual([]);
      expect(delivered).toEqual([]);
      expect(await raw.count(name)).toBe(0);
    });

    test('an error thrown after publish inside the transaction relays nothing', async () => {
      const { delivered, relay } = collect();
      const outboxer = await manual({ relay });
      const name = outboxer.outbox('events').table.name;
      const attempt = opened.transaction((tx) =>
        andThen(outboxer.publish(tx, 'events', { n: 1 }, { groupKey: 'g' }), () => {
          throw new Rollback('after publish');
        }),
      );
      await expect(attempt).rejects.toBeInstanceOf(Rollback);
      expect((await outboxer.drain()).delivered).toEqual([]);
      expect(delivered).toEqual([]);
      expect(await raw.count(name)).toBe(0);
    });

    test('publishMany writes every message in one statement and relays them in order', async () => {
      const { delivered, relay } = collect();
      const { statements, database } = recording(opened.database);
      const postgres = harness.dialect === 'postgres';
      // serializeWrites and notify add the advisory-lock and NOTIFY array parameters on Postgres.
      const outboxer = await manual(
        { relay, ...(postgres ? { serializeWrites: true, notify: true } : {}) },
        database,
      );
      const inputs = [
        { outbox: 'events', payload: awkward, groupKey: 'a', headers: { h: '1' } },
        { outbox: 'events', payload: 'just a string', groupKey: null },
        { outbox: 'events', payload: [1, '2', null], groupKey: 'b', type: 'list' },
        { outbox: 'events', payload: { n: 4 }, groupKey: 'a' },
        { outbox: 'events', payload: null, groupKey: 'c' },
      ];
      const ids = await opened.transaction((tx) => outboxer.publishMany(tx, inputs));
      if (harness.dialect === 'mysql') {
        // One INSERT of every message; beside it, statements that read the ids it drew and tally.
        const name = outboxer.outbox('events').table.name;
        expect(statements.filter((q) => q.text.startsWith(`INSERT INTO \`${name}\` (`))).toHaveLength(1);
      } else {
        expect(statements).toHaveLength(1);
      }
      expect(ids).toHaveLength(inputs.length);
      expect([...ids].sort((x, y) => x - y)).toEqual(ids);
      await outboxer.drain();
      expect(delivered.map((m) => m.id).sort((x, y) => x - y)).toEqual(ids);
      const byId = new Map(delivered.map((m) => [m.id, m]));
      inputs.forEach((input, i) => {
        expect(byId.get(ids[i]!)).toMatchObject({
          payload: input.payload,
          groupKey: input.groupKey,
          type: input.type ?? null,
        });
      });
    });

    test('a failed delivery is retried after the rest of its group was held, then delivered in order', async () => {
      const seen: number[] = [];
      let failures = 0;
      const relay = functionRelay(async (m: Envelope) => {
        if ((m.payload as { n: number }).n === 1 && failures === 0) {
          failures += 1;
          throw new Error('destination hiccup');
        }
        seen.push(m.id);
      });
      const outboxer = await manual({ relay, backoff: { min: 10, max: 10 } });
      const ids = await opened.transaction((tx) =>
        outboxer.publishMany(
          tx,
          [1, 2, 3].map((n) => ({ outbox: 'events', payload: { n }, groupKey: 'same' })),
        ),
      );
      const result = await outboxer.drain();
      expect(result.retried.map((r) => r.envelope.id)).toEqual([ids[0]]);
      expect(result.retried[0]!.error).toMatch(/destination hiccup/);
      expect(seen).toEqual(ids);
      expect(result.pending).toBe(0);
    });

    test('a dead message is listed, revived with retryDead and delivered; discard removes one', async () => {
      let permanent = true;
      const seen: number[] = [];
      const relay = functionRelay(async (m: Envelope) => {
        if (permanent) throw new PermanentError('rejected');
        seen.push(m.id);
      });
      // With maxAttempts finite (not strict), a PermanentError makes a message dead at once.
      const outboxer = await manual({ relay, maxAttempts: 5 });
      const [first, second] = await opened.transaction((tx) =>
        outboxer.publishMany(tx, [
          { outbox: 'events', payload: 1, groupKey: 'x' },
          { outbox: 'events', payload: 2, groupKey: 'y' },
        ]),
      );
      await outboxer.drain();
      expect((await outboxer.listDead('events')).map((m) => m.id)).toEqual([first, second]);
      expect(await outboxer.discard('events', [second!])).toBe(1);
      permanent = false;
      expect(await outboxer.retryDead('events', { ids: [first!] })).toBe(1);
      await outboxer.drain();
      expect(seen).toEqual([first]);
      expect(await outboxer.counts('events')).toMatchObject({ pending: 0, dead: 0 });
    });

    test("the inbox handles a message once in the library's transaction; a throwing handler leaves nothing", async () => {
      const inboxTable = table();
      const effects = `${inboxTable}_effects`;
      // The handler's own table, in the collation of an application's tables on MySQL (the test
      // database defaults to outboxer's utf8mb4_bin, whose text Prisma 6 cannot read back).
      const collation = harness.dialect === 'mysql' ? ' COLLATE utf8mb4_unicode_ci' : '';
      await opened.database.execute({
        text: `CREATE TABLE ${effects} (effect TEXT NOT NULL)${collation}`,
        values: [],
      });
      const outboxer = new Outboxer({
        database: opened.database,
        inboxes: { payments: { table: inboxTable } },
      });
      await outboxer.migrate();
      // Literal values: the effect's statement is the same text on every dialect (RETURNING, as
      // Drizzle's SQLite transactions run queries that return rows). m2 comes after m1 in group g.
      const handle = (tx: Tx, id: string, effect: string, fail = false) =>
        outboxer.inbox('payments').handle(tx, { id, groupKey: 'g', sequence: id === 'm1' ? '2' : 1 }, () =>
          andThen(
            opened.database.executeInTransaction(tx, {
              text: `INSERT INTO ${effects} (effect) VALUES ('${effect}') RETURNING effect`,
              values: [],
            }),
            () => {
              if (fail) throw new Rollback('the handler failed');
              return effect;
            },
          ),
        );
      expect(await opened.transaction((tx) => handle(tx, 'm1', 'one'))).toEqual({
        duplicate: false,
        value: 'one',
      });
      expect(await opened.transaction((tx) => handle(tx, 'm1', 'two'))).toMatchObject({ duplicate: true });
      // The caller catches the handler's error and commits: the savepoint took the effect and the record back.
      await opened.transaction((tx) => {
        let attempt: unknown;
        try {
          attempt = handle(tx, 'm2', 'partial', true);
        } catch {
          return undefined;
        }
        return (attempt as Promise<unknown>).then(
          () => undefined,
          () => undefined,
        );
      });
      expect(await opened.transaction((tx) => handle(tx, 'm2', 'three'))).toEqual({
        duplicate: false,
        value: 'three',
        outOfOrder: true,
        after: '2',
      });
      const rows = await raw.query(`SELECT effect FROM ${effects} ORDER BY effect`);
      expect(rows.map((row) => row.effect)).toEqual(['one', 'three']);
      expect(await raw.count(inboxTable)).toBe(2);
    });

    test('publish refuses what is not an open transaction with NOT_IN_TRANSACTION', async () => {
      const outboxer = await manual({ relay: functionRelay(async () => undefined) });
      const candidates = opened.notTransactions();
      expect(Object.keys(candidates).length).toBeGreaterThan(0);
      for (const [what, candidate] of Object.entries(candidates)) {
        let error: unknown;
        try {
          await outboxer.publish(candidate as Tx, 'events', { n: 1 });
        } catch (caught) {
          error = caught;
        }
        expect(isOutboxerError(error) && error.code, what).toBe('NOT_IN_TRANSACTION');
      }
      expect(await outboxer.counts('events')).toMatchObject({ pending: 0 });
    });

    /**
     * Whether a second publisher of `group` waits on the lock serializeWrites takes: Postgres' advisory
     * lock on the group (a bigint key: high half in classid, low half in objid, objsubid 1), MySQL's
     * row lock on the group's row of `<table>_groups`, seen as a statement on it in the process list.
     */
    async function publisherWaitsOnGroup(group: string): Promise<boolean> {
      if (harness.dialect === 'mysql') {
        // This file's database only: the other adapters' suites run on the same server at once.
        const running = await raw.query(
          `SELECT state, info FROM information_schema.PROCESSLIST WHERE db = ?`,
          [target.kind === 'mysql' ? target.database : ''],
        );
        return (
          running.filter((row) => String(row.info).includes('_groups` (outbox, group_key)')).length === 1
        );
      }
      const [row] = await raw.query(
        `SELECT count(*)::int AS n FROM pg_locks l, hashtextextended($1, 0) AS h(key)
         WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objsubid = 1
           AND l.classid::bigint = ((h.key >> 32) & 4294967295) AND l.objid::bigint = (h.key & 4294967295)`,
        [group],
      );
      return Number(row!.n) === 1;
    }

    if (harness.dialect !== 'sqlite') {
      test('serializeWrites: a second transaction publishing to the same group waits until the first commits', async () => {
        const outboxer = await manual({ relay: functionRelay(async () => undefined), serializeWrites: true });
        const group = `serial-${Math.random().toString(36).slice(2)}`;
        const events: string[] = [];
        let release!: () => void;
        const gate = new Promise<void>((resolve) => (release = resolve));
        let firstPublished!: () => void;
        const published = new Promise<void>((resolve) => (firstPublished = resolve));
        const first = opened.transaction(async (tx) => {
          const id = await outboxer.publish(tx, 'events', { n: 1 }, { groupKey: group });
          events.push('first published');
          firstPublished();
          await gate;
          events.push('first commits');
          return id;
        });
        await published;
        const second = opened.transaction(async (tx) => {
          const id = await outboxer.publish(tx, 'events', { n: 2 }, { groupKey: group });
          events.push('second published');
          return id;
        });
        await waitUntil(
          () => publisherWaitsOnGroup(group),
          10_000,
          'the second publish to wait for the group lock',
        );
        expect(events).toEqual(['first published']);
        release();
        const [firstId, secondId] = await Promise.all([first, second]);
        expect(events).toEqual(['first published', 'first commits', 'second published']);
        expect(secondId).toBeGreaterThan(firstId);
      });
    }

    if (harness.dialect === 'mysql') {
      test('a publish or an inbox handle in a transaction InnoDB rolled back on a deadlock is NOT_IN_TRANSACTION and writes nothing', async () => {
        const outboxer = await manual({ relay: functionRelay(async () => undefined) });
        const name = outboxer.outbox('events').table.name;
        const inboxTable = table();
        const inboxer = new Outboxer({
          database: opened.database,
          inboxes: { payments: { table: inboxTable } },
        });
        await inboxer.migrate();
        const locks = `${name}_locks`;
        await opened.database.execute({
          text: `CREATE TABLE ${locks} (id INT PRIMARY KEY, n INT)`,
          values: [],
        });
        await opened.database.execute({ text: `INSERT INTO ${locks} VALUES (1, 0)`, values: [] });
        let sharing = 0;
        let bothShare!: () => void;
        const barrier = new Promise<void>((resolve) => (bothShare = resolve));
        // Both share a lock on the row, then both want it exclusively: InnoDB breaks the cycle by
        // rolling one back. The victim carries on, as a caller that caught the error could.
        const refusals: unknown[] = [];
        const outcomes = await Promise.all(
          [1, 2].map((n) =>
            opened.transaction(async (tx) => {
              const run = (text: string) => opened.database.executeInTransaction(tx, { text, values: [] });
              await run(`SELECT n FROM ${locks} WHERE id = 1 LOCK IN SHARE MODE`);
              if (++sharing === 2) bothShare();
              await barrier;
              try {
                await run(`UPDATE ${locks} SET n = ${n} WHERE id = 1`);
                return 'updated';
              } catch (deadlock) {
                const messages: string[] = [];
                for (let e = deadlock; e instanceof Error; e = e.cause) messages.push(e.message);
                expect(messages.join('\n')).toMatch(/deadlock/i);
              }
              const codeOf = (error: unknown) => {
                refusals.push(error);
                return isOutboxerError(error) ? error.code : String(error);
              };
              const published = await Promise.resolve(outboxer.publish(tx, 'events', { n })).then(
                () => 'published',
                codeOf,
              );
              const handled = await Promise.resolve(
                inboxer.inbox('payments').handle(tx, { id: `m${n}` }, () => 'effect'),
              ).then(() => 'handled', codeOf);
              return `${published}, ${handled}`;
            }),
          ),
        );
        expect(outcomes.sort()).toEqual(['NOT_IN_TRANSACTION, NOT_IN_TRANSACTION', 'updated']);
        for (const refusal of refusals)
          expect((refusal as Error).message).toMatch(/rolled it back after a deadlock/);
        expect(await raw.count(name)).toBe(0);
        expect(await raw.count(inboxTable)).toBe(0);
      });

      test('without NOTIFY: a relay with a long poll interval picks up what its own instance published', async () => {
        const arrivals: Array<{ id: number; at: number }> = [];
        const relay = functionRelay(async (m: Envelope) => void arrivals.push({ id: m.id, at: Date.now() }));
        const outboxer = new Outboxer({
          database: opened.database,
          outboxes: { events: { relay, table: table(), pollInterval: 60_000 } },
        });
        await outboxer.migrate();
        await outboxer.start();
        try {
          const first = await opened.transaction((tx) => outboxer.publish(tx, 'events', { n: 1 }));
          await waitUntil(() => arrivals.some((a) => a.id === first), 10_000, 'the first message');
          await sleep(300); // the worker has found nothing more and sleeps for a minute
          const second = await opened.transaction((tx) => outboxer.publish(tx, 'events', { n: 2 }));
          // Woken in-process (a minute of polling interval would fail the wait).
          await waitUntil(() => arrivals.some((a) => a.id === second), 10_000, 'the woken worker');
        } finally {
          await outboxer.stop();
        }
      });
    }

    if (harness.dialect !== 'postgres') return;

    test('publish after a failed statement of the transaction is NOT_IN_TRANSACTION: roll it back', async () => {
      const outboxer = await manual({ relay: functionRelay(async () => undefined) });
      let error: unknown;
      await opened.rollback(async (tx) => {
        // The statement fails through the adapter itself, so the suite needs nothing of the library.
        const failing = { text: 'SELECT 1 / 0', values: [] };
        await Promise.resolve(opened.database.executeInTransaction(tx, failing)).catch(() => undefined);
        try {
          await outboxer.publish(tx, 'events', { n: 1 });
        } catch (caught) {
          error = caught;
        }
      });
      expect(isOutboxerError(error) && error.code).toBe('NOT_IN_TRANSACTION');
      expect((error as Error).message).toMatch(/transaction that already failed.*must be rolled back/);
      // The database's own error, where the INSERT reached it (pg may refuse before, from the client's status).
      const causes: string[] = [];
      for (let e = (error as Error).cause; e instanceof Error; e = e.cause) causes.push(e.message);
      if (causes.length > 0) expect(causes.join('\n')).toMatch(/current transaction is aborted/);
      expect(await outboxer.counts('events')).toMatchObject({ pending: 0 });
    });

    test('notify: a started relay with a long poll interval picks a message up within a second of the commit', async () => {
      const arrivals: Array<{ id: number; at: number }> = [];
      const relay = functionRelay(async (m: Envelope) => void arrivals.push({ id: m.id, at: Date.now() }));
      const outboxer = new Outboxer({
        database: opened.database,
        outboxes: { events: { relay, table: table(), notify: true, pollInterval: 60_000 } },
      });
      await outboxer.migrate();
      await outboxer.start();
      try {
        // The first message may be found by the first poll; then the worker sleeps for a minute.
        const first = await opened.transaction((tx) => outboxer.publish(tx, 'events', { n: 1 }));
        await waitUntil(() => arrivals.some((a) => a.id === first), 10_000, 'the first message');
        await sleep(300);
        const second = await opened.transaction((tx) => outboxer.publish(tx, 'events', { n: 2 }));
        const committed = Date.now();
        await waitUntil(() => arrivals.some((a) => a.id === second), 5_000, 'the notified message');
        expect(arrivals.find((a) => a.id === second)!.at - committed).toBeLessThan(1_500);
      } finally {
        await outboxer.stop();
      }
    });
  });
}
