import { expect, test } from 'vitest';
import { Outboxer, functionRelay, isOutboxerError, type Envelope } from 'outboxer';
import { sleep, waitUntil } from '../support/random.js';
import { type BehaviourSuite } from './behaviour-suite.js';

/**
 * The adapter behaviour tests of the transaction itself: what publish refuses (not a transaction, a
 * failed one, a deadlock victim), serializeWrites' lock, and a relay woken by its own publishes.
 */
export function transactionBehaviour<Tx>(suite: BehaviourSuite<Tx>): void {
  const { harness, table, manual } = suite;

  test('publish refuses what is not an open transaction with NOT_IN_TRANSACTION', async () => {
    const outboxer = await manual({ relay: functionRelay(async () => undefined) });
    const candidates = suite.opened.notTransactions();
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
      const running = await suite.raw.query(
        `SELECT state, info FROM information_schema.PROCESSLIST WHERE db = ?`,
        [suite.target.kind === 'mysql' ? suite.target.database : ''],
      );
      return running.filter((row) => String(row.info).includes('_groups` (outbox, group_key)')).length === 1;
    }
    const [row] = await suite.raw.query(
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
      const first = suite.opened.transaction(async (tx) => {
        const id = await outboxer.publish(tx, 'events', { n: 1 }, { groupKey: group });
        events.push('first published');
        firstPublished();
        await gate;
        events.push('first commits');
        return id;
      });
      await published;
      const second = suite.opened.transaction(async (tx) => {
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
        database: suite.opened.database,
        inboxes: { payments: { table: inboxTable } },
      });
      await inboxer.migrate();
      const locks = `${name}_locks`;
      await suite.opened.database.execute({
        text: `CREATE TABLE ${locks} (id INT PRIMARY KEY, n INT)`,
        values: [],
      });
      await suite.opened.database.execute({ text: `INSERT INTO ${locks} VALUES (1, 0)`, values: [] });
      let sharing = 0;
      let bothShare!: () => void;
      const barrier = new Promise<void>((resolve) => (bothShare = resolve));
      // Both share a lock on the row, then both want it exclusively: InnoDB breaks the cycle by
      // rolling one back. The victim carries on, as a caller that caught the error could.
      const refusals: unknown[] = [];
      const outcomes = await Promise.all(
        [1, 2].map((n) =>
          suite.opened.transaction(async (tx) => {
            const run = (text: string) =>
              suite.opened.database.executeInTransaction(tx, { text, values: [] });
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
      expect(await suite.raw.count(name)).toBe(0);
      expect(await suite.raw.count(inboxTable)).toBe(0);
    });

    test('without NOTIFY: a relay with a long poll interval picks up what its own instance published', async () => {
      const arrivals: Array<{ id: number; at: number }> = [];
      const relay = functionRelay(async (m: Envelope) => void arrivals.push({ id: m.id, at: Date.now() }));
      const outboxer = new Outboxer({
        database: suite.opened.database,
        outboxes: { events: { relay, table: table(), pollInterval: 60_000 } },
      });
      await outboxer.migrate();
      await outboxer.start();
      try {
        const first = await suite.opened.transaction((tx) => outboxer.publish(tx, 'events', { n: 1 }));
        await waitUntil(() => arrivals.some((a) => a.id === first), 10_000, 'the first message');
        await sleep(300); // the worker has found nothing more and sleeps for a minute
        const second = await suite.opened.transaction((tx) => outboxer.publish(tx, 'events', { n: 2 }));
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
    await suite.opened.rollback(async (tx) => {
      // The statement fails through the adapter itself, so the suite needs nothing of the library.
      const failing = { text: 'SELECT 1 / 0', values: [] };
      await Promise.resolve(suite.opened.database.executeInTransaction(tx, failing)).catch(() => undefined);
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
      database: suite.opened.database,
      outboxes: { events: { relay, table: table(), notify: true, pollInterval: 60_000 } },
    });
    await outboxer.migrate();
    await outboxer.start();
    try {
      // The first message may be found by the first poll; then the worker sleeps for a minute.
      const first = await suite.opened.transaction((tx) => outboxer.publish(tx, 'events', { n: 1 }));
      await waitUntil(() => arrivals.some((a) => a.id === first), 10_000, 'the first message');
      await sleep(300);
      const second = await suite.opened.transaction((tx) => outboxer.publish(tx, 'events', { n: 2 }));
      // Delivered long before the next poll (a minute away): only the notification can have woken it.
      await waitUntil(() => arrivals.some((a) => a.id === second), 5_000, 'the notified message');
    } finally {
      await outboxer.stop();
    }
  });
}
