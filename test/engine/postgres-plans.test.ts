/**
 * The plan Postgres picks for the poll's probe of a blocked group: a look-up of the hash index
 * `_blocking_keys` per ready row, never a pass over every blocking message of the outbox.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer } from 'outboxer';
import { postgresDialect } from 'outboxer/pg';
import { postgresFixture } from '../support/databases.js';
import { explainNodes } from '../support/plans.js';
import { firstPoll } from '../support/poll-params.js';

describe('the poll on postgres, with 2,000 blocked groups', () => {
  let fixture: Awaited<ReturnType<typeof postgresFixture>>;
  const table = 'plans_blocked';
  beforeAll(async () => {
    fixture = await postgresFixture();
    const outboxer = new Outboxer({ database: fixture.database, relay: false, outboxes: { o: { table } } });
    await outboxer.migrate();
    // 2,000 retrying heads, and ready rows of other groups behind them.
    await fixture.query(
      `INSERT INTO "${table}" (outbox, partition, group_key, payload, status, next_attempt_at)
       SELECT 'o', 0, 'blocked:' || g, '1', 1, now() + interval '1 hour' FROM generate_series(1, 2000) AS g`,
    );
    await fixture.query(
      `INSERT INTO "${table}" (outbox, partition, group_key, payload) SELECT 'o', 0, 'free:' || g, '1' FROM generate_series(1, 1000) AS g`,
    );
    await fixture.query(`ANALYZE "${table}"`);
  });
  afterAll(() => fixture.close());

  test.each([false, true])(
    'parkDead %s: one hash look-up of the group key per ready row',
    async (parkDead) => {
      const poll = postgresDialect.poll({ schema: undefined, name: table }, firstPoll({ parkDead }));
      const nodes = await explainNodes(fixture.query, poll.text, poll.values);
      const probes = nodes
        .filter((node) => node.Alias === 'h')
        .map((node) => `${node['Node Type']} ${node['Index Name'] ?? ''}`);
      expect(probes).toEqual([`Index Scan ${table}_blocking_keys`]);
      const rows = poll.read(await fixture.query(poll.text, [...poll.values]));
      expect(rows.messages).toHaveLength(100);
      expect(rows.messages.every((m) => !m.blocked)).toBe(true);
    },
  );
});
