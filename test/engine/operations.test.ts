/**
 * The operator's view: blocked groups, parked dead letters redriven in order, the strict deadline,
 * and the group blocked/unblocked events.
 */
import diagnostics from 'node:diagnostics_channel';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay, type Envelope, type OutboxOptions } from 'outboxer';
import {
  engineFixtures,
  reportSkippedFixtures,
  publishInTransaction,
  type EngineFixture,
} from '../support/databases.js';
import { sleep, waitUntil } from '../support/random.js';

describe.each(engineFixtures)('operations on $name', ({ make }) => {
  let fixture: EngineFixture;
  beforeAll(async () => {
    fixture = await make();
  });
  afterAll(() => fixture.close());

  let tables = 0;
  /** A manual-mode outbox whose destination refuses payloads listed in `poison`. */
  function setup(options: OutboxOptions) {
    const poison = new Set<string>();
    const delivered: Array<{ id: number; groupKey: string | null; payload: unknown }> = [];
    const relay = functionRelay(async (m: Envelope) => {
      if (poison.has(String(m.payload))) throw new Error(`refused ${String(m.payload)}`);
      delivered.push({ id: m.id, groupKey: m.groupKey, payload: m.payload });
    });
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { ops: { relay, table: `ops_${++tables}`, ...options } },
      testing: 'manual',
    }) as Outboxer<never, boolean>;
    const publish = (items: Array<[string, string | null]>) =>
      publishInTransaction(
        fixture,
        outboxer,
        items.map(([payload, groupKey]) => ({ outbox: 'ops', payload, groupKey })),
      );
    return { outboxer, poison, delivered, publish };
  }

  test('counts with upTo: exact below the cap, the cap and exact: false at or above it', async () => {
    const { outboxer, poison, publish } = setup({ maxAttempts: 1 });
    await outboxer.migrate();
    poison.add('d1');
    await publish([
      ['d1', null],
      ['p1', 'a'],
      ['p2', 'a'],
      ['p3', 'b'],
      ['p4', null],
    ]);
    await outboxer.drain('ops', { maxRounds: 1 }); // d1 goes dead, the rest is delivered
    await publish([
      ['q1', 'a'],
      ['q2', 'b'],
      ['q3', null],
    ]);
    expect(await outboxer.counts('ops')).toMatchObject({ pending: 3, dead: 1, exact: true });
    expect(await outboxer.counts('ops', { upTo: 10 })).toMatchObject({ pending: 3, dead: 1, exact: true });
    expect(await outboxer.counts('ops', { upTo: 2 })).toMatchObject({ pending: 2, dead: 1, exact: false });
    const capped = await outboxer.counts('ops', { upTo: 1 });
    expect(capped).toMatchObject({ pending: 1, dead: 1, delivered: 0, orphaned: 0, exact: false });
    expect(capped.oldestPendingAt).toBeInstanceOf(Date);
    for (const upTo of [0, -1, 1.5, Number.NaN, '10']) {
      await expect(outboxer.counts('ops', { upTo: upTo as number })).rejects.toMatchObject({
        code: 'INVALID_OPTIONS',
      });
    }
    await outboxer.close();
  });

  test('blockedGroups: the head holding each group back, since when, why, and how many wait behind it', async () => {
    const { outboxer, poison, publish } = setup({});
    await outboxer.migrate();
    poison.add('a1');
    const [a1] = await publish([
      ['a1', 'a'],
      ['a2', 'a'],
      ['a3', 'a'],
      ['b1', 'b'],
    ]);
    await outboxer.drain('ops', { maxRounds: 2 });
    await publish([['a4', 'a']]);
    const [group, ...rest] = await outboxer.blockedGroups('ops');
    expect(rest).toEqual([]);
    expect(group).toMatchObject({
      groupKey: 'a',
      headId: a1,
      parked: false,
      attempts: 2,
      lastError: 'Error: refused a1',
      waiting: 3,
    });
    expect(group!.blockedSince).toBeInstanceOf(Date);
    expect(group!.nextAttemptAt).toBeInstanceOf(Date);
    await outboxer.close();
  });

  test("onDead: 'park': a dead head holds its group; retryDead redrives the group in its original order", async () => {
    const { outboxer, poison, delivered, publish } = setup({ maxAttempts: 2, onDead: 'park' });
    await outboxer.migrate();
    poison.add('g1');
    const first = await publish([
      ['g1', 'g'],
      ['g2', 'g'],
      ['x1', 'x'],
      ['g3', 'g'],
    ]);
    const result = await outboxer.drain('ops');
    expect(result.dead.map((d) => d.envelope.id)).toEqual([first[0]]);
    expect(delivered.map((d) => d.payload)).toEqual(['x1']); // the other group flowed
    // More messages for the parked group wait too.
    const later = await publish([['g4', 'g']]);
    await outboxer.drain('ops');
    expect(delivered.map((d) => d.payload)).toEqual(['x1']);
    const [parked] = await outboxer.blockedGroups('ops');
    expect(parked).toMatchObject({
      groupKey: 'g',
      headId: first[0],
      parked: true,
      waiting: 3,
      nextAttemptAt: null,
    });
    expect(await outboxer.counts('ops')).toMatchObject({ pending: 3, dead: 1 });

    poison.clear();
    expect(await outboxer.retryDead('ops')).toBe(1);
    await outboxer.drain('ops');
    expect(delivered.map((d) => d.id)).toEqual([first[2], first[0], first[1], first[3], later[0]]);
    expect(await outboxer.counts('ops')).toMatchObject({ pending: 0, dead: 0 });
    expect(await outboxer.blockedGroups('ops')).toEqual([]);
    await outboxer.close();
  });

  test('a parked group moves on when its dead head is discarded', async () => {
    const { outboxer, poison, delivered, publish } = setup({ maxAttempts: 1, onDead: 'park' });
    await outboxer.migrate();
    poison.add('p1');
    const ids = await publish([
      ['p1', 'p'],
      ['p2', 'p'],
    ]);
    await outboxer.drain('ops');
    expect(delivered).toEqual([]);
    await outboxer.discard('ops', [ids[0]!]);
    await outboxer.drain('ops');
    expect(delivered.map((d) => d.id)).toEqual([ids[1]]);
    await outboxer.close();
  });

  // docs/reliability.md, finding 13: MySQL's release of held messages compared group keys with
  // NOT IN over the blocking heads, which a dead (or retrying) message without a group key made
  // unknown for every group: nothing was released, and a later message of the group went out
  // before the ones held.
  test('a parked group moves on when its dead head is discarded, while a message without a group key is parked too', async () => {
    const { outboxer, poison, delivered, publish } = setup({ maxAttempts: 1, onDead: 'park' });
    await outboxer.migrate();
    poison.add('p1');
    poison.add('n1');
    const ids = await publish([
      ['p1', 'p'],
      ['p2', 'p'],
      ['n1', null],
    ]);
    await outboxer.drain('ops');
    expect(delivered).toEqual([]);
    expect(await outboxer.discard('ops', [ids[0]!])).toBe(1);
    const [later] = await publish([['p3', 'p']]);
    await outboxer.drain('ops');
    expect(delivered.map((d) => d.id)).toEqual([ids[1], later]);
    expect((await outboxer.listDead('ops')).map((m) => m.id)).toEqual([ids[2]]);
    await outboxer.close();
  });

  test("'continue' (the default): a dead head lets its group move on", async () => {
    const { outboxer, poison, delivered, publish } = setup({ maxAttempts: 1 });
    await outboxer.migrate();
    poison.add('c1');
    const ids = await publish([
      ['c1', 'c'],
      ['c2', 'c'],
    ]);
    await outboxer.drain('ops');
    expect(delivered.map((d) => d.id)).toEqual([ids[1]]);
    expect(await outboxer.blockedGroups('ops')).toEqual([]);
    await outboxer.close();
  });

  test('strict mode with maxRetryDuration: a head failing for longer than that goes dead (or parks)', async () => {
    for (const onDead of ['continue', 'park'] as const) {
      const { outboxer, poison, delivered, publish } = setup({
        maxAttempts: Infinity,
        // Long enough that the first drain's attempts fit in it on a loaded machine.
        maxRetryDuration: 1000,
        onDead,
      });
      await outboxer.migrate();
      poison.add('s1');
      const ids = await publish([
        ['s1', 's'],
        ['s2', 's'],
      ]);
      const first = await outboxer.drain('ops', { maxRounds: 3 });
      expect(first.dead).toEqual([]); // many attempts, but not yet for long
      await sleep(1100);
      const second = await outboxer.drain('ops', { maxRounds: 3 });
      expect(second.dead.map((d) => d.envelope.id)).toEqual([ids[0]]);
      expect(delivered.map((d) => d.id)).toEqual(onDead === 'continue' ? [ids[1]] : []);
      await outboxer.close();
    }
  });

  test('group blocked and unblocked events', async () => {
    const events: Array<[string, Record<string, unknown>]> = [];
    const subscriptions = ['group:blocked', 'group:unblocked'].map((name) => {
      const listener = (message: unknown) => events.push([name, message as Record<string, unknown>]);
      diagnostics.subscribe(`outboxer:${name}`, listener);
      return () => diagnostics.unsubscribe(`outboxer:${name}`, listener);
    });
    try {
      const { outboxer, poison, publish } = setup({});
      await outboxer.migrate();
      poison.add('e1');
      const [e1] = await publish([
        ['e1', 'e'],
        ['e2', 'e'],
      ]);
      await outboxer.drain('ops', { maxRounds: 2 });
      poison.clear();
      await outboxer.drain('ops');
      expect(events).toEqual([
        [
          'group:blocked',
          expect.objectContaining({
            outbox: 'ops',
            groupKey: 'e',
            headId: e1,
            parked: false,
            error: 'Error: refused e1',
          }),
        ],
        ['group:unblocked', expect.objectContaining({ outbox: 'ops', groupKey: 'e' })],
      ]);
      await outboxer.close();
    } finally {
      for (const unsubscribe of subscriptions) unsubscribe();
    }
  });

  test("'park' with 'total' ordering stops the whole outbox behind a dead message", async () => {
    const { outboxer, poison, delivered, publish } = setup({
      ordering: 'total',
      maxAttempts: 1,
      onDead: 'park',
    });
    await outboxer.migrate();
    poison.add('t2');
    const ids = await publish([
      ['t1', 'a'],
      ['t2', 'b'],
      ['t3', null],
    ]);
    await outboxer.drain('ops');
    expect(delivered.map((d) => d.id)).toEqual([ids[0]]);
    poison.clear();
    await outboxer.retryDead('ops');
    await waitUntil(async () => (await outboxer.drain('ops')).pending === 0, 5000, 'the redrive');
    expect(delivered.map((d) => d.id)).toEqual(ids);
    await outboxer.close();
  });
});

describe.each(engineFixtures)('onDead agreement on $name', ({ make }) => {
  test('an instance whose onDead differs from the relaying nodes refuses to revive or discard dead messages', async () => {
    const fixture = await make();
    try {
      const relay = functionRelay(async () => undefined);
      const relaying = new Outboxer({
        database: fixture.database,
        outboxes: { ops: { relay, table: 'agree', onDead: 'park', maxAttempts: 1 } },
      });
      await relaying.migrate();
      await relaying.start();
      await relaying.stop();
      const admin = new Outboxer({
        database: fixture.database,
        outboxes: { ops: { table: 'agree' } },
        relay: false,
      });
      await expect(admin.retryDead('ops')).rejects.toMatchObject({
        code: 'CONFIGURATION_MISMATCH',
        message: expect.stringMatching(/onDead "continue" here but "park"/),
      });
      await expect(admin.discard('ops', [1])).rejects.toMatchObject({ code: 'CONFIGURATION_MISMATCH' });
      const agreeing = new Outboxer({
        database: fixture.database,
        outboxes: { ops: { table: 'agree', onDead: 'park' } },
        relay: false,
      });
      expect(await agreeing.retryDead('ops')).toBe(0);
      // A relaying node with another onDead refuses to start, like any other difference.
      const other = new Outboxer({
        database: fixture.database,
        outboxes: { ops: { relay, table: 'agree' } },
      });
      await expect(other.start()).rejects.toMatchObject({ code: 'CONFIGURATION_MISMATCH' });
    } finally {
      await fixture.close();
    }
  });
});

reportSkippedFixtures('operations');
reportSkippedFixtures('onDead agreement');
