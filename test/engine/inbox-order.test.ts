/**
 * Order at the consumer on each database: a message that arrives after a later one of its group
 * (by the producer's sequence, the `outboxer-id` header) is handled once and reported with the
 * highest sequence handled before it; in-order messages report nothing; the group's highest
 * sequence moves with the handler's effect or not at all, stays right under concurrent consumers
 * of one group, is pruned with the inbox's retention, and bad sequences write nothing.
 */
import diagnostics from 'node:diagnostics_channel';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, isOutboxerError, type InboxMessage, type InboxOrder } from 'outboxer';
import { fixtures, mariadbFixture, postgresFixture, type Fixture } from '../support/databases.js';
import { receive, type AnyOutboxer } from '../support/inbox.js';
import { waitUntil } from '../support/random.js';

const TABLE = 'order_inbox';

/** The group's highest sequence handled, as decimal text, or undefined when it has no row. */
async function highest(fixture: Fixture, groupKey: string, source = 'orders'): Promise<string | undefined> {
  const cast = fixture.kind === 'mysql' ? 'CHAR' : 'TEXT';
  const rows = await fixture.query(
    `SELECT CAST(highest AS ${cast}) AS highest FROM ${TABLE}_groups WHERE inbox = 'payments' AND source = ${fixture.kind === 'postgres' ? '$1' : '?'} AND group_key = ${fixture.kind === 'postgres' ? '$2' : '?'}`,
    [source, groupKey],
  );
  return rows[0] === undefined ? undefined : String(rows[0].highest);
}

async function groupRows(fixture: Fixture): Promise<number> {
  return Number((await fixture.query(`SELECT count(*) AS n FROM ${TABLE}_groups`))[0]!.n);
}

/** Collects what `outboxer:inbox:out-of-order` publishes while `fn` runs. */
async function reported(fn: () => Promise<void>): Promise<unknown[]> {
  const seen: unknown[] = [];
  const listener = (event: unknown) => seen.push(event);
  diagnostics.subscribe('outboxer:inbox:out-of-order', listener);
  try {
    await fn();
  } finally {
    diagnostics.unsubscribe('outboxer:inbox:out-of-order', listener);
  }
  return seen;
}

describe.each(fixtures)('order at the consumer on $name', ({ make }) => {
  let fixture: Fixture;
  let outboxer: AnyOutboxer;
  const effects = async () =>
    (await fixture.query('SELECT effect FROM effects ORDER BY effect')).map((row) => row.effect);
  const message = (groupKey: string | null, sequence: InboxMessage['sequence']): InboxMessage => ({
    id: `${groupKey}-${String(sequence)}`,
    source: 'orders',
    groupKey,
    sequence,
  });

  beforeAll(async () => {
    fixture = await make();
    outboxer = new Outboxer({
      database: fixture.database,
      inboxes: { payments: { table: TABLE } },
    }) as AnyOutboxer;
    await outboxer.migrate();
    await fixture.query('CREATE TABLE effects (effect TEXT NOT NULL)');
  });
  afterAll(() => fixture.close());

  test('messages of a group in order report nothing, and their handler is told so', async () => {
    const orders: InboxOrder[] = [];
    const events = await reported(async () => {
      for (const sequence of [3, '10', 11n]) {
        const outcome = await receive(
          fixture,
          outboxer,
          message('in-order', sequence),
          `in-order ${sequence}`,
          {
            onOrder: (order) => orders.push(order),
          },
        );
        expect(outcome).toEqual({ duplicate: false, value: `in-order ${sequence}` });
        expect(outcome).not.toHaveProperty('outOfOrder');
      }
    });
    expect(events).toEqual([]);
    expect(orders).toEqual([{ outOfOrder: false }, { outOfOrder: false }, { outOfOrder: false }]);
    expect(await highest(fixture, 'in-order')).toBe('11');
  });

  test('a late message is handled once and reported with the highest sequence before it; its duplicate is a duplicate', async () => {
    await receive(fixture, outboxer, message('late', 5), 'late 5');
    const orders: InboxOrder[] = [];
    const events = await reported(async () => {
      const late = await receive(fixture, outboxer, message('late', 3), 'late 3', {
        onOrder: (order) => orders.push(order),
      });
      expect(late).toEqual({ duplicate: false, value: 'late 3', outOfOrder: true, after: '5' });
      const again = await receive(fixture, outboxer, message('late', 3), 'late 3 again');
      expect(again.duplicate).toBe(true);
      // The group goes on from its highest: the next message is in order.
      expect(await receive(fixture, outboxer, message('late', 6), 'late 6')).toEqual({
        duplicate: false,
        value: 'late 6',
      });
    });
    expect(orders).toEqual([{ outOfOrder: true, after: '5' }]);
    expect(events).toEqual([
      expect.objectContaining({
        inbox: 'payments',
        source: 'orders',
        id: 'late-3',
        groupKey: 'late',
        sequence: '3',
        after: '5',
      }),
    ]);
    expect(await effects()).toEqual(expect.arrayContaining(['late 5', 'late 3', 'late 6']));
    expect(await effects()).not.toContain('late 3 again');
    expect(await highest(fixture, 'late')).toBe('6');
  });

  test('groups and sources are kept apart, and a message without a group key is not checked', async () => {
    await receive(fixture, outboxer, message('apart-a', 50), 'apart-a 50');
    expect((await receive(fixture, outboxer, message('apart-b', 2), 'apart-b 2')).outOfOrder).toBeUndefined();
    const otherSource = { ...message('apart-a', 2), source: 'refunds' };
    expect((await receive(fixture, outboxer, otherSource, 'apart-a 2 refunds')).outOfOrder).toBeUndefined();
    const before = await groupRows(fixture);
    await receive(fixture, outboxer, { id: 'ungrouped-9', source: 'orders', sequence: 9 }, 'ungrouped 9');
    const ungrouped = await receive(
      fixture,
      outboxer,
      { id: 'ungrouped-1', source: 'orders', sequence: 1 },
      'u1',
    );
    expect(ungrouped).toEqual({ duplicate: false, value: 'u1' });
    expect(await groupRows(fixture)).toBe(before);
  });

  test('sequences up to 2^63-1 keep their precision on every database', async () => {
    await receive(fixture, outboxer, message('big', '9223372036854775807'), 'big max');
    const late = await receive(fixture, outboxer, message('big', 9_223_372_036_854_775_806n), 'big max-1');
    expect(late).toMatchObject({ outOfOrder: true, after: '9223372036854775807' });
    expect(await highest(fixture, 'big')).toBe('9223372036854775807');
  });

  test("a handler that throws, or the caller's rollback, leaves the group's highest sequence as it was", async () => {
    await receive(fixture, outboxer, message('undo', 10), 'undo 10');
    await receive(fixture, outboxer, message('undo', 20), 'undo 20 failed', { fail: true, swallow: true });
    await receive(fixture, outboxer, message('undo', 30), 'undo 30 rolled back', { rollback: true });
    expect(await highest(fixture, 'undo')).toBe('10');
    // 15 comes after 10, the highest handled: neither 20 nor 30 counts, as neither was handled.
    expect(await receive(fixture, outboxer, message('undo', 15), 'undo 15')).toEqual({
      duplicate: false,
      value: 'undo 15',
    });
    expect(await effects()).not.toContain('undo 20 failed');
    expect(await effects()).not.toContain('undo 30 rolled back');
    // Redelivered, 20 is handled, in order.
    expect((await receive(fixture, outboxer, message('undo', 20), 'undo 20')).outOfOrder).toBeUndefined();
  });

  test('bad sequences get INVALID_MESSAGE and write nothing', async () => {
    const before = [await groupRows(fixture), (await effects()).length];
    const refuse = async (sequence: unknown) => {
      const error = await receive(
        fixture,
        outboxer,
        message('bad', sequence as InboxMessage['sequence']),
        'bad',
      ).then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(isOutboxerError(error) && error.code, `${String(sequence)}: ${String(error)}`).toBe(
        'INVALID_MESSAGE',
      );
      expect((error as Error).message).toMatch(/sequence must be a non-negative integer/);
    };
    for (const sequence of [
      -1,
      1.5,
      Number.MAX_SAFE_INTEGER + 1,
      Number.NaN,
      -1n,
      2n ** 63n,
      '',
      '-3',
      '1e3',
      ' 7',
      '9223372036854775808',
      '12345678901234567890',
      true,
      {},
    ])
      await refuse(sequence);
    expect([await groupRows(fixture), (await effects()).length]).toEqual(before);
  });

  test("pruning removes a group's row not moved within the retention, with its ids", async () => {
    const shortLived = new Outboxer({
      database: fixture.database,
      inboxes: { payments: { table: TABLE, retention: { keep: 3600 } } },
    }) as AnyOutboxer;
    await receive(fixture, shortLived, message('pruned', 40), 'pruned 40');
    await shortLived.inbox('payments').prune();
    expect(await highest(fixture, 'pruned')).toBe('40'); // advanced seconds ago, kept an hour
    const events: unknown[] = [];
    const listener = (event: unknown) => events.push(event);
    diagnostics.subscribe('outboxer:inbox:prune', listener);
    try {
      await shortLived.inbox('payments').prune(Date.now() + 7_200_000); // two hours later
    } finally {
      diagnostics.unsubscribe('outboxer:inbox:prune', listener);
    }
    expect(await groupRows(fixture)).toBe(0);
    expect(events).toEqual([expect.objectContaining({ inbox: 'payments', groups: expect.any(Number) })]);
    expect((events[0] as { groups: number }).groups).toBeGreaterThan(0);
    // Forgotten: a lower sequence of the group is no longer known to be late.
    expect(
      (await receive(fixture, shortLived, message('pruned', 39), 'pruned 39')).outOfOrder,
    ).toBeUndefined();
  });
});

/**
 * Two consumers of one group at once: the first handles its message and waits inside its handler;
 * the second's handle must wait for it on the group's row, then see its committed sequence. A
 * consumer of another group meanwhile is not held up.
 */
describe.each([
  { name: 'Postgres', make: () => postgresFixture() },
  { name: 'MariaDB', make: () => mariadbFixture() },
])('order at the consumer under concurrent consumers on $name', ({ make }) => {
  test.each([
    { first: 5, second: 3, outOfOrder: true, final: '5' },
    { first: 7, second: 9, outOfOrder: false, final: '9' },
  ])(
    'sequence $first holding the group, then $second: the second is out of order: $outOfOrder, highest $final',
    async ({ first, second, outOfOrder, final }) => {
      const fixture = await make();
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      const transactions: Promise<unknown>[] = [];
      try {
        const outboxer = new Outboxer({
          database: fixture.database,
          inboxes: { payments: { table: TABLE } },
        }) as AnyOutboxer;
        await outboxer.migrate();
        await fixture.query('CREATE TABLE effects (effect TEXT NOT NULL)');
        // The group's row exists before the race in one case, and is created by the race in the other.
        if (!outOfOrder)
          await receive(fixture, outboxer, { id: 'g-1', source: 'orders', groupKey: 'g', sequence: 1 }, '1');
        let firstRunning!: () => void;
        const running = new Promise<void>((resolve) => (firstRunning = resolve));
        const handle = (sequence: number, wait: boolean) =>
          (fixture.transaction as (fn: (tx: unknown) => Promise<unknown>) => Promise<unknown>)(async (tx) =>
            outboxer
              .inbox('payments')
              .handle(
                tx as never,
                { id: `g-${sequence}`, source: 'orders', groupKey: 'g', sequence },
                async () => {
                  if (wait) {
                    firstRunning();
                    await released;
                  }
                  return sequence;
                },
              ),
          );
        const holding = handle(first, true);
        transactions.push(holding);
        await running;
        const waiting = handle(second, false);
        transactions.push(waiting);
        await waitUntil(
          async () => (await lockWaits(fixture)) === 1,
          20_000,
          'the second transaction waiting on the group row',
        );
        // Another group is not serialised behind the held one.
        expect(
          await receive(fixture, outboxer, { id: 'h-1', source: 'orders', groupKey: 'h', sequence: 1 }, 'h'),
        ).toEqual({ duplicate: false, value: 'h' });
        release();
        expect(await holding).toEqual({ duplicate: false, value: first });
        expect(await waiting).toEqual(
          outOfOrder
            ? { duplicate: false, value: second, outOfOrder: true, after: String(first) }
            : { duplicate: false, value: second },
        );
        expect(await highest(fixture, 'g')).toBe(final);
      } finally {
        release();
        await Promise.allSettled(transactions);
        await fixture.close();
      }
    },
  );
});

/** How many of the fixture's sessions wait on a row lock of the groups table. */
async function lockWaits(fixture: Fixture): Promise<number> {
  if (fixture.kind === 'postgres') {
    const rows = await fixture.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
      [fixture.schema],
    );
    return rows[0]!.n as number;
  }
  if (fixture.kind !== 'mysql') return 0;
  const rows = await fixture.query(
    `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND COMMAND = 'Query' AND INFO LIKE 'INSERT INTO %${TABLE}_groups%' AND TIME_MS > 200`,
    [fixture.schema],
  );
  return Number(rows[0]!.n);
}
