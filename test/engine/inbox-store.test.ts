/**
 * Store, then process in order, on each database: `store` dedupes in the caller's transaction and
 * a rollback takes the stored message with it; relaying nodes process stored messages once each,
 * in order per group, across partitions, with a handler that fails sometimes; a commit whose reply
 * is lost (the engine never settles that attempt) has no second effect; dead messages are listed
 * and retried; counts and listings see the backing outbox; bad input writes nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, isOutboxerError, type StoreMessage } from 'outboxer';
import {
  engineFixtures,
  reportSkippedFixtures,
  type EngineFixture as Fixture,
} from '../support/databases.js';
import type { AnyOutboxer } from '../support/inbox.js';
import { EFFECTS_TABLE, effectsOf, processOn, runnerOf, storeAll } from '../support/inbox-store.js';
import { waitUntil } from '../support/random.js';

const TABLE = 'store_inbox';
/** Fast retries: the tests wait for outcomes, never for time. */
const QUICK = { pollInterval: 20, backoff: { min: 5, max: 40 } };

describe.each(engineFixtures)('store, then process on $name', ({ make }) => {
  let fixture: Fixture;
  const running: AnyOutboxer[] = [];

  /** An instance with one store-mode inbox, `name`, started unless `start: false`. */
  async function consumer(
    name: string,
    process: Record<string, unknown>,
    options: { start?: boolean; inboxes?: Record<string, unknown> } = {},
  ): Promise<AnyOutboxer> {
    const outboxer = new Outboxer({
      database: fixture.database,
      logger: false,
      inboxes: { [name]: { table: TABLE, process: { ...QUICK, ...process } }, ...options.inboxes } as never,
    }) as AnyOutboxer;
    running.push(outboxer);
    await outboxer.migrate();
    if (options.start !== false) await outboxer.start();
    return outboxer;
  }

  const message = (groupKey: string | null, seq: number, id = `${groupKey}-${seq}`): StoreMessage => ({
    id,
    source: 'orders',
    groupKey,
    payload: { seq },
  });
  const inboxRows = async (inbox: string) =>
    Number(
      (
        await fixture.query(
          `SELECT count(*) AS n FROM ${TABLE} WHERE inbox = ${fixture.kind === 'postgres' ? '$1' : '?'}`,
          [inbox],
        )
      )[0]!.n,
    );

  beforeAll(async () => {
    fixture = await make();
    await fixture.query(EFFECTS_TABLE);
  });
  afterAll(async () => {
    for (const outboxer of running) await outboxer.stop();
    await fixture.close();
  });

  test('store dedupes on (source, id); counts and listPending see the backing outbox', async () => {
    // Its own table: migrate() creates it.
    const outboxer = await consumer(
      'listed',
      { ...processOn(fixture, 'listed'), table: 'stored_messages' },
      { start: false },
    );
    const inbox = outboxer.inbox('listed');
    expect(inbox.outbox).toBe('inbox:listed');
    const [first, second] = await storeAll(fixture, outboxer, 'listed', [
      { ...message('g', 1), headers: { tenant: 't1', 'outboxer-id': '7' }, type: 'order.paid' },
      message('g', 2),
    ]);
    const [again, otherSource] = await storeAll(fixture, outboxer, 'listed', [
      message('g', 1),
      { ...message('g', 1), source: 'refunds' },
    ]);
    // With the producer's sequence, a message stored after a later one of its group is reported.
    const [, late] = await storeAll(fixture, outboxer, 'listed', [
      { ...message('h', 5), sequence: 5 },
      { ...message('h', 3), sequence: 3 },
    ]);
    expect(late).toEqual({ duplicate: false, value: expect.any(Number), outOfOrder: true, after: '5' });
    expect(first).toEqual({ duplicate: false, value: expect.any(Number) });
    expect(second!.duplicate).toBe(false);
    expect(again!.duplicate).toBe(true);
    expect(otherSource!.duplicate).toBe(false);
    expect((await outboxer.counts('inbox:listed')).pending).toBe(5);
    const pending = (await outboxer.listPending('inbox:listed')).slice(0, 3);
    expect(pending.map((m) => m.payload)).toEqual([
      { id: 'g-1', source: 'orders', payload: { seq: 1 }, headers: { tenant: 't1', 'outboxer-id': '7' } },
      { id: 'g-2', source: 'orders', payload: { seq: 2 } },
      { id: 'g-1', source: 'refunds', payload: { seq: 1 } },
    ]);
    expect(pending[0]).toMatchObject({
      id: first!.duplicate ? -1 : first!.value,
      groupKey: 'g',
      type: 'order.paid',
    });
  });

  test('a store in a rolled-back transaction leaves nothing: the redelivery is stored', async () => {
    const outboxer = await consumer('rolled', processOn(fixture, 'rolled'), { start: false });
    await storeAll(fixture, outboxer, 'rolled', [message('g', 1)], { rollback: true });
    expect(await inboxRows('rolled')).toBe(0);
    expect((await outboxer.counts('inbox:rolled')).pending).toBe(0);
    const [outcome] = await storeAll(fixture, outboxer, 'rolled', [message('g', 1)]);
    expect(outcome!.duplicate).toBe(false);
    expect((await outboxer.counts('inbox:rolled')).pending).toBe(1);
  });

  test('processes each stored message once, in order per group, across partitions, through failures', async () => {
    const groups = ['a', 'b', 'c', 'd'];
    const perGroup = 8;
    // Every third message fails its first two attempts after writing its effect (rolled back).
    const outboxer = await consumer(
      'ordered',
      {
        ...processOn(fixture, 'ordered', (m) =>
          (m.payload as { seq: number }).seq % 3 === 0 && m.attempts < 2 ? new Error('not yet') : undefined,
        ),
        partitions: 3,
        batchSize: 5,
      },
      { start: false },
    );
    // Stored interleaved, in several transactions, some twice (a broker redelivering).
    for (let seq = 1; seq <= perGroup; seq++) {
      await storeAll(
        fixture,
        outboxer,
        'ordered',
        groups.map((g) => message(g, seq)),
      );
      if (seq % 4 === 0) await storeAll(fixture, outboxer, 'ordered', [message('a', seq - 1)]);
    }
    await outboxer.start();
    const expected = Array.from({ length: perGroup }, (_, i) => i + 1);
    await waitUntil(
      async () =>
        Object.values(await effectsOf(fixture, 'ordered')).flat().length >= groups.length * perGroup,
      30_000,
      'every stored message processed',
    );
    await waitUntil(async () => (await outboxer.counts('inbox:ordered')).pending === 0, 30_000, 'settled');
    // Each group's effects, in the order they were made: exactly its messages, once, in order.
    expect(await effectsOf(fixture, 'ordered')).toEqual(Object.fromEntries(groups.map((g) => [g, expected])));
  });

  test('a commit whose reply is lost has no second effect: the redelivery is a duplicate', async () => {
    const base = runnerOf(fixture);
    let lost = 0;
    let calls = 0;
    // The runner commits, then reports a failure once: the engine retries a message whose
    // effect and "processed" record are committed, as after a crash before the settle.
    const runner = (work: (tx: unknown) => unknown) => {
      calls++;
      const lose = () => {
        if (lost++ === 0) throw new Error('connection lost after COMMIT');
      };
      const result = base(work);
      if (result instanceof Promise) return result.then((value) => (lose(), value));
      lose();
      return result;
    };
    const outboxer = await consumer('crash', processOn(fixture, 'crash', undefined, runner), {
      start: false,
    });
    await storeAll(fixture, outboxer, 'crash', [message('g', 1), message('g', 2)]);
    await outboxer.start();
    await waitUntil(async () => (await outboxer.counts('inbox:crash')).pending === 0, 30_000, 'settled');
    expect(calls).toBeGreaterThanOrEqual(3); // g-1 twice (the second a duplicate), g-2 once
    expect(await effectsOf(fixture, 'crash')).toEqual({ g: [1, 2] });
    expect(await inboxRows('inbox:crash')).toBe(2);
  });

  test('past maxAttempts a message is dead and its group goes on; retryDead processes it', async () => {
    let broken = true;
    const orders: unknown[] = [];
    const outboxer = await consumer('dead', {
      ...processOn(fixture, 'dead', (m, order) => {
        if (!broken) orders.push(order);
        return broken && (m.payload as { seq: number }).seq === 1 ? new Error('poison') : undefined;
      }),
      maxAttempts: 2,
    });
    const [poison, second] = await storeAll(fixture, outboxer, 'dead', [message('g', 1), message('g', 2)]);
    await waitUntil(async () => (await outboxer.counts('inbox:dead')).dead === 1, 30_000, 'dead');
    await waitUntil(async () => (await outboxer.counts('inbox:dead')).pending === 0, 30_000, 'g-2 processed');
    const [dead] = await outboxer.listDead('inbox:dead');
    expect(dead).toMatchObject({
      id: poison!.duplicate ? -1 : poison!.value,
      attempts: 2,
      lastError: expect.stringContaining('poison'),
    });
    expect(await effectsOf(fixture, 'dead')).toEqual({ g: [2] });
    broken = false;
    expect(await outboxer.retryDead('inbox:dead')).toBe(1);
    await waitUntil(async () => (await outboxer.counts('inbox:dead')).pending === 0, 30_000, 'retried');
    expect(await effectsOf(fixture, 'dead')).toEqual({ g: [2, 1] });
    // Processed after a later message of its group: the handler is told.
    expect(orders).toEqual([{ outOfOrder: true, after: String(second!.duplicate ? -1 : second!.value) }]);
    expect(await outboxer.listDead('inbox:dead')).toEqual([]);
  });

  test('pruning forgets the stored and the processed ids past the retention', async () => {
    const outboxer = await consumer('pruned', processOn(fixture, 'pruned'));
    await storeAll(fixture, outboxer, 'pruned', [message('g', 1)]);
    await waitUntil(async () => (await inboxRows('inbox:pruned')) === 1, 30_000, 'processed');
    expect(await outboxer.inbox('pruned').prune(Date.now() + 8 * 86_400_000)).toBe(2);
    expect(await inboxRows('pruned')).toBe(0);
    expect(await inboxRows('inbox:pruned')).toBe(0);
  });

  test('in manual testing mode, drain() processes what was stored', async () => {
    const outboxer = new Outboxer({
      database: fixture.database,
      testing: 'manual',
      logger: false,
      inboxes: { drained: { table: TABLE, process: processOn(fixture, 'drained') } },
    }) as AnyOutboxer;
    await outboxer.migrate();
    await storeAll(fixture, outboxer, 'drained', [message('g', 1), message('g', 2)]);
    const drained = await outboxer.drain('inbox:drained');
    expect([drained.delivered.length, drained.pending]).toEqual([2, 0]);
    expect(await effectsOf(fixture, 'drained')).toEqual({ g: [1, 2] });
    await outboxer.close();
  });

  test('bad input gets typed errors and writes nothing', async () => {
    const outboxer = await consumer(
      'strict',
      { ...processOn(fixture, 'strict'), maxPayloadBytes: 100 },
      {
        start: false,
        inboxes: { plain: { table: TABLE } },
      },
    );
    const refused = async (inbox: string, stored: unknown) => {
      try {
        await storeAll(fixture, outboxer, inbox, [stored as StoreMessage]);
      } catch (error) {
        return isOutboxerError(error) ? error.code : String(error);
      }
      return 'stored';
    };
    expect(await refused('strict', { source: 'x', payload: 1 })).toBe('INVALID_MESSAGE');
    expect(await refused('strict', { id: 'no-payload' })).toBe('INVALID_MESSAGE');
    expect(await refused('strict', { id: 'big', payload: 'x'.repeat(200) })).toBe('PAYLOAD_TOO_LARGE');
    expect(await refused('strict', { id: 'bad-headers', payload: 1, headers: { n: 1 } })).toBe(
      'INVALID_MESSAGE',
    );
    expect(await refused('strict', { id: 'x'.repeat(401), payload: 1 })).toBe('INVALID_MESSAGE');
    expect(await refused('plain', { id: 'no-process', payload: 1 })).toBe('INVALID_STATE');
    expect(await refused('missing', { id: 'unknown', payload: 1 })).toBe('UNKNOWN_INBOX');
    expect(await inboxRows('strict')).toBe(0);
    expect(await inboxRows('plain')).toBe(0);
    expect((await outboxer.counts('inbox:strict')).pending).toBe(0);
    // The oversized message, trimmed, is stored: the refusal recorded nothing.
    expect((await storeAll(fixture, outboxer, 'strict', [{ id: 'big', payload: 'x' }]))[0]!.duplicate).toBe(
      false,
    );
  });
});

reportSkippedFixtures('store, then process');

describe('the process option', () => {
  // Options are checked at construction, before any SQL: a stand-in adapter is enough.
  const make =
    (inboxes: unknown, extra: Record<string, unknown> = {}) =>
    () =>
      new Outboxer({
        database: { dialect: { capabilities: {} }, executeInTransaction() {}, sync: false } as never,
        inboxes: inboxes as never,
        ...extra,
      });
  const process = { transaction: () => undefined, handler: () => undefined };
  const code = (fn: () => unknown) => {
    try {
      fn();
    } catch (error) {
      return isOutboxerError(error) ? `${error.code}: ${error.message}` : String(error);
    }
    return 'accepted';
  };

  test('is checked at construction, with the option named', () => {
    expect(code(make({ p: { process: { ...process, relay: {} } } }))).toMatch(
      /INVALID_OPTIONS: Unknown option "inboxes.p.process.relay"/,
    );
    expect(code(make({ p: { process: { handler: process.handler } } }))).toMatch(
      /INVALID_OPTIONS: Option "inboxes.p.process.transaction" must be a function/,
    );
    expect(code(make({ p: { process: { ...process, partitions: 0 } } }))).toMatch(
      /Option "inboxes.p.process.partitions" must be an integer from 1 to 1024/,
    );
    expect(code(make({ ['x'.repeat(95)]: { process } }))).toMatch(/at most 94 characters/);
  });

  test('its outbox cannot be configured beside it; a relaying instance cannot name one inbox:*', () => {
    expect(code(make({ p: { process } }, { relay: false, outboxes: { 'inbox:p': {} } }))).toMatch(
      /Option "outboxes.inbox:p" must be left out: it is the outbox of inboxes.p.process/,
    );
    expect(code(make({ p: {} }, { outboxes: { 'inbox:p': { relay: { deliver() {} } } } }))).toMatch(
      /INVALID_IDENTIFIER/,
    );
    expect(code(make({ p: {} }, { relay: false, outboxes: { 'inbox:p': {} } }))).toBe('accepted');
  });
});
