import { expect, test } from 'vitest';
import { Outboxer, PermanentError, functionRelay, type Envelope } from 'outboxer';
import { Rollback, andThen, awkward, recording, type BehaviourSuite } from './behaviour-suite.js';

/**
 * The adapter behaviour tests of publishing and delivery: committed and rolled-back transactions,
 * publishMany, retries with the group held, dead messages, and the inbox in the library's transaction.
 */
export function deliveryBehaviour<Tx>(suite: BehaviourSuite<Tx>): void {
  const { harness, table, manual, collect } = suite;

  test('a committed message is relayed, with its payload, group key, type and headers', async () => {
    const { delivered, relay } = collect();
    const outboxer = await manual({ relay });
    const published = await suite.opened.transaction((tx) => {
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
    await suite.opened.rollback((tx) => outboxer.publish(tx, 'events', { n: 1 }, { groupKey: 'g' }));
    expect((await outboxer.drain()).delivered).toEqual([]);
    expect(delivered).toEqual([]);
    expect(await suite.raw.count(name)).toBe(0);
  });

  test('an error thrown after publish inside the transaction relays nothing', async () => {
    const { delivered, relay } = collect();
    const outboxer = await manual({ relay });
    const name = outboxer.outbox('events').table.name;
    const attempt = suite.opened.transaction((tx) =>
      andThen(outboxer.publish(tx, 'events', { n: 1 }, { groupKey: 'g' }), () => {
        throw new Rollback('after publish');
      }),
    );
    await expect(attempt).rejects.toBeInstanceOf(Rollback);
    expect((await outboxer.drain()).delivered).toEqual([]);
    expect(delivered).toEqual([]);
    expect(await suite.raw.count(name)).toBe(0);
  });

  test('publishMany writes every message in one statement and relays them in order', async () => {
    const { delivered, relay } = collect();
    const { statements, database } = recording(suite.opened.database);
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
    const ids = await suite.opened.transaction((tx) => outboxer.publishMany(tx, inputs));
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
    const ids = await suite.opened.transaction((tx) =>
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
    const [first, second] = await suite.opened.transaction((tx) =>
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
    await suite.opened.database.execute({
      text: `CREATE TABLE ${effects} (effect TEXT NOT NULL)${collation}`,
      values: [],
    });
    const outboxer = new Outboxer({
      database: suite.opened.database,
      inboxes: { payments: { table: inboxTable } },
    });
    await outboxer.migrate();
    // Literal values: the effect's statement is the same text on every dialect (RETURNING, as
    // Drizzle's SQLite transactions run queries that return rows). m2 comes after m1 in group g.
    const handle = (tx: Tx, id: string, effect: string, fail = false) =>
      outboxer.inbox('payments').handle(tx, { id, groupKey: 'g', sequence: id === 'm1' ? '2' : 1 }, () =>
        andThen(
          suite.opened.database.executeInTransaction(tx, {
            text: `INSERT INTO ${effects} (effect) VALUES ('${effect}') RETURNING effect`,
            values: [],
          }),
          () => {
            if (fail) throw new Rollback('the handler failed');
            return effect;
          },
        ),
      );
    expect(await suite.opened.transaction((tx) => handle(tx, 'm1', 'one'))).toEqual({
      duplicate: false,
      value: 'one',
    });
    expect(await suite.opened.transaction((tx) => handle(tx, 'm1', 'two'))).toMatchObject({
      duplicate: true,
    });
    // The caller catches the handler's error and commits: the savepoint took the effect and the record back.
    await suite.opened.transaction((tx) => {
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
    expect(await suite.opened.transaction((tx) => handle(tx, 'm2', 'three'))).toEqual({
      duplicate: false,
      value: 'three',
      outOfOrder: true,
      after: '2',
    });
    const rows = await suite.raw.query(`SELECT effect FROM ${effects} ORDER BY effect`);
    expect(rows.map((row) => row.effect)).toEqual(['one', 'three']);
    expect(await suite.raw.count(inboxTable)).toBe(2);
  });
}
