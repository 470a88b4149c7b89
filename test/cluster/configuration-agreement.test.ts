/**
 * Configuration agreement on one real Postgres: a relaying node whose configuration differs from
 * the recorded one refuses to start, saying what differs; changing partitions needs reconfigure
 * (and "force" while messages are pending); rows in partitions no worker reads are orphaned;
 * counts() warns about a silent backlog. On every dialect, with a fresh table: configuration.test.ts.
 */
import { describe, expect, test } from 'vitest';
import { functionRelay } from 'outboxer';
import { publishInTransaction } from '../support/databases.js';
import { fixture, instance, newTable, setUpPostgres } from './support.js';

setUpPostgres();

describe('configuration agreement', () => {
  test('a relaying node whose configuration differs from the recorded one refuses to start, saying what differs', async () => {
    const table = newTable();
    const relay = functionRelay(async () => undefined);
    const first = instance(table, { relay, partitions: 2 });
    await first.migrate();
    await first.start();
    await first.stop();
    const second = instance(table, { relay, partitions: 3, ordering: 'none' });
    await expect(second.start()).rejects.toMatchObject({
      code: 'CONFIGURATION_MISMATCH',
      message: expect.stringMatching(
        /partitions is 3 here but 2 in the database; ordering is "none" here but "group"/,
      ),
    });
    // A publish-only node is not checked: it starts nothing.
    await instance(table, { partitions: 3 }, { relay: false }).start();
  });

  test('changing partitions needs reconfigure, and reconfigure: "force" while messages are pending', async () => {
    const table = newTable();
    const relay = functionRelay(async () => {
      throw new Error('destination down');
    });
    const first = instance(table, { relay, partitions: 2 });
    await first.migrate();
    await first.start();
    await first.stop();
    await publishInTransaction(fixture, first, [{ outbox: 'events', payload: 1, groupKey: 'g' }]);
    await expect(instance(table, { relay, partitions: 4, reconfigure: true }).start()).rejects.toMatchObject({
      code: 'CONFIGURATION_MISMATCH',
      message: expect.stringMatching(/while 1 messages are pending/),
    });
    const forced = instance(table, { relay, partitions: 4, reconfigure: 'force' });
    await forced.start();
    await forced.stop();
    const recorded = await fixture.query(`SELECT partitions FROM ${table}_config WHERE outbox = 'events'`);
    expect(recorded[0]!.partitions).toBe(4);
  });

  test('rows in partitions no worker reads are reported as orphaned', async () => {
    const table = newTable();
    const wide = instance(table, { partitions: 8 }, { relay: false });
    await wide.migrate();
    await publishInTransaction(
      fixture,
      wide,
      Array.from({ length: 40 }, (_, i) => ({ outbox: 'events', payload: i, groupKey: `g${i}` })),
    );
    const narrow = instance(table, { partitions: 2 }, { relay: false });
    const counts = await narrow.counts('events');
    const expected = await fixture.query(`SELECT count(*)::int AS n FROM ${table} WHERE partition >= 2`);
    expect(counts.orphaned).toBe(expected[0]!.n);
    expect(counts.orphaned).toBeGreaterThan(0);
    expect(counts.relaySeenAt).toBeNull();
  });

  test('counts() warns about a silent backlog: messages pending and no relaying node seen', async () => {
    const table = newTable();
    const warnings: string[] = [];
    const logger = {
      debug() {},
      info() {},
      warn: (message: string) => void warnings.push(message),
      error() {},
    };
    const node = instance(table, {}, { relay: false, logger });
    await node.migrate();
    await publishInTransaction(fixture, node, [{ outbox: 'events', payload: 1 }]);
    await node.counts('events');
    expect(warnings.some((w) => /no relaying node has been seen/.test(w))).toBe(true);
  });
});
