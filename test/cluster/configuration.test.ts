/**
 * Configuration agreement on a fresh table, and orphans judged by the recorded configuration, on
 * both dialects (configuration-agreement.test.ts has the rest of configuration agreement, on
 * Postgres).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay, type OutboxOptions } from 'outboxer';
import {
  engineFixtures,
  reportSkippedFixtures,
  publishInTransaction,
  type EngineFixture,
} from '../support/databases.js';

describe.each(engineFixtures)('configuration agreement on $name', ({ make }) => {
  let fixture: EngineFixture;
  beforeAll(async () => {
    fixture = await make();
  });
  afterAll(() => fixture.close());

  let tables = 0;
  const newTable = () => `config_${++tables}`;
  function instance(table: string, options: OutboxOptions, extra: Record<string, unknown> = {}) {
    return new Outboxer({
      database: fixture.database,
      outboxes: { events: { table, pollInterval: 20, ...options } },
      leaseTimeout: 600,
      ...extra,
    } as never) as Outboxer<never, boolean>;
  }

  test('two relaying nodes with different partitions starting together on a fresh table: exactly one starts', async () => {
    const relay = functionRelay(async () => undefined);
    // On Postgres both read "nothing recorded" before either writes in some rounds (before the fix,
    // both started). On SQLite the two starts did not interleave so in one process: there this
    // covers the insert-if-absent statement rather than the race.
    for (let round = 0; round < 10; round += 1) {
      const table = newTable();
      await instance(table, {}, { relay: false }).migrate();
      const nodes = [2, 3].map((partitions) => instance(table, { relay, partitions }));
      const results = await Promise.allSettled(nodes.map((node) => node.start()));
      try {
        const started = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
        expect(started, `round ${round}`).toHaveLength(1);
        const refused = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
        expect(refused.reason).toMatchObject({
          code: 'CONFIGURATION_MISMATCH',
          message: expect.stringMatching(/partitions is \d here but \d in the database/),
        });
        const recorded = await fixture.query(
          `SELECT partitions FROM ${table}_config WHERE outbox = 'events'`,
        );
        expect(recorded.map((r) => Number(r.partitions))).toEqual([[2, 3][started[0]!]]);
      } finally {
        await Promise.all(nodes.map((node) => node.stop()));
      }
    }
  });

  test('counts() on a publish-only node finds orphans with the recorded partitions, not its own', async () => {
    const table = newTable();
    const warnings: string[] = [];
    const logger = {
      debug() {},
      info() {},
      warn: (message: string) => void warnings.push(message),
      error() {},
    };
    // The relaying nodes run 2 partitions (recorded at start); a publisher is deployed with 8.
    const relaying = instance(table, { relay: functionRelay(async () => undefined), partitions: 2 });
    await relaying.migrate();
    await relaying.start();
    await relaying.stop();
    const wide = instance(table, { partitions: 8 }, { relay: false, logger });
    await publishInTransaction(
      fixture,
      wide,
      Array.from({ length: 40 }, (_, i) => ({ outbox: 'events', payload: i, groupKey: `g${i}` })),
    );
    const [row] = await fixture.query(`SELECT count(*) AS n FROM "${table}" WHERE "partition" >= 2`);
    const expected = Number(row!.n);
    expect(expected).toBeGreaterThan(0);
    expect((await wide.counts('events')).orphaned).toBe(expected);
    expect(warnings.some((w) => w.includes('sit in partitions >= 2,'))).toBe(true);
    expect((await wide.counts('events', { upTo: 1000 })).orphaned).toBe(expected);
    // An instance configured like the relays agrees.
    expect((await instance(table, { partitions: 2 }, { relay: false }).counts('events')).orphaned).toBe(
      expected,
    );
  });
});

reportSkippedFixtures('configuration agreement');
