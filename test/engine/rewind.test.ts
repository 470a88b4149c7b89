/**
 * Messages made ready again below the workers' cursors by a statement outside the worker:
 * `discard()` of a parked head releases its group's held messages, `retryDead()` revives dead
 * ones, all with their old ids. A later message of the same group must not be delivered before
 * them, whether the relay is draining a backlog (full polls) or idle (on Postgres the cursor stays
 * where it was when a poll finds less than a full batch).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, batchRelay, type Envelope } from 'outboxer';
import {
  engineFixtures,
  reportSkippedFixtures,
  publishInTransaction,
  type EngineFixture,
} from '../support/databases.js';
import { waitUntil } from '../support/random.js';

describe.each(engineFixtures)('messages made ready below the cursor on $name', ({ name, make }) => {
  let fixture: EngineFixture;
  beforeAll(async () => {
    fixture = await make();
  });
  afterAll(() => fixture.close());

  let tables = 0;
  /**
   * A relay that refuses the `head` payload (and what follows it in its group within the batch),
   * records what it delivered, and holds the first batch
   * that carries a payload in `holdAt` until `release()`. No periodic restart of the cursor on
   * Postgres during the test; SQLite has no NOTIFY, so it polls often.
   */
  function setup(options: { onDead: 'park' | 'continue'; holdAt?: string }) {
    const delivered: Envelope[] = [];
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let holding = false;
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: {
        rw: {
          table: `rewind_${++tables}`,
          batchSize: 5,
          maxAttempts: 1,
          onDead: options.onDead,
          ...(name === 'postgres' ? { notify: true, pollInterval: 60_000 } : { pollInterval: 50 }),
          relay: batchRelay(async (batch) => {
            if (!holding && batch.some((m) => m.payload === options.holdAt)) {
              holding = true;
              await released;
            }
            // Like a destination taking messages in order: a group stops at its first refusal.
            const refused = new Set<string | null>();
            return batch.map((m) => {
              if (m.payload === 'head' || refused.has(m.groupKey)) {
                refused.add(m.groupKey);
                return { ok: false, error: new Error('refused') };
              }
              delivered.push(m);
              return { ok: true };
            });
          }),
        },
      },
    }) as Outboxer<never, boolean>;
    const publish = (items: Array<[string, string]>) =>
      publishInTransaction(
        fixture,
        outboxer,
        items.map(([payload, groupKey]) => ({ outbox: 'rw', payload, groupKey })),
      );
    const group = (key: string) => delivered.filter((m) => m.groupKey === key).map((m) => m.payload);
    return { outboxer, publish, delivered, group, release, holding: () => holding };
  }

  const others = (from: number, count: number): Array<[string, string]> =>
    Array.from({ length: count }, (_, i) => [`o${from + i}`, `other:${from + i}`]);

  async function heldCount(outboxer: Outboxer<never, boolean>): Promise<number> {
    const groups = await outboxer.blockedGroups('rw');
    return groups.reduce((sum, g) => sum + g.waiting, 0);
  }

  test('discard() while a backlog drains: the released messages go out before a later one of their group', async () => {
    const run = setup({ onDead: 'park', holdAt: 'o20' });
    await run.outboxer.migrate();
    await run.publish([['head', 'g'], ['g1', 'g'], ['g2', 'g'], ...others(0, 40)]);
    await run.outboxer.start();
    // The relay holds a batch far past g1 and g2, which wait in `held` behind the parked head.
    await waitUntil(run.holding, 10_000, 'the held batch');
    const [dead] = await run.outboxer.listDead('rw');
    expect(dead?.payload).toBe('head');
    expect(await heldCount(run.outboxer)).toBe(2);
    expect(await run.outboxer.discard('rw', [dead!.id])).toBe(1);
    await run.publish([['g3', 'g'], ...others(40, 20)]);
    run.release();
    await waitUntil(() => run.delivered.length === 63, 10_000, 'every message');
    await run.outboxer.stop();
    expect(run.group('g')).toEqual(['g1', 'g2', 'g3']);
    await run.outboxer.close();
  });

  test('discard() while the relay is idle: the released messages go out before a later one of their group', async () => {
    const run = setup({ onDead: 'park' });
    await run.outboxer.migrate();
    await run.publish([['head', 'g'], ['g1', 'g'], ['g2', 'g'], ...others(0, 3)]);
    await run.outboxer.start();
    await waitUntil(() => run.delivered.length === 3, 10_000, 'the other groups');
    await waitUntil(async () => (await heldCount(run.outboxer)) === 2, 10_000, 'g1 and g2 held');
    const [dead] = await run.outboxer.listDead('rw');
    expect(await run.outboxer.discard('rw', [dead!.id])).toBe(1);
    await run.publish([['g3', 'g']]);
    await waitUntil(() => run.group('g').length === 3, 10_000, 'group g');
    await run.outboxer.stop();
    expect(run.group('g')).toEqual(['g1', 'g2', 'g3']);
    await run.outboxer.close();
  });

  test('retryDead() while the relay is idle: the revived message is picked up at the next poll', async () => {
    const run = setup({ onDead: 'continue' });
    await run.outboxer.migrate();
    await run.publish([['head', 'g'], ...others(0, 3)]);
    await run.outboxer.start();
    await waitUntil(() => run.delivered.length === 3, 10_000, 'the other groups');
    await waitUntil(async () => (await run.outboxer.listDead('rw')).length === 1, 10_000, 'the dead head');
    // Its destination takes it now: revive it, and wake the relay with a message of another group.
    const [dead] = await run.outboxer.listDead('rw');
    await fixture.query(`UPDATE rewind_${tables} SET payload = '"revived"' WHERE id = ${dead!.id}`);
    expect(await run.outboxer.retryDead('rw')).toBe(1);
    await run.publish(others(3, 1));
    await waitUntil(() => run.group('g').length === 1, 5_000, 'the revived message');
    await run.outboxer.stop();
    expect(run.group('g')).toEqual(['revived']);
    await run.outboxer.close();
  });
});

reportSkippedFixtures('messages made ready below the cursor');
