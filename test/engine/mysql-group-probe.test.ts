/**
 * MariaDB: the poll's probe of each polled row's group (is its head retrying, or parked dead?)
 * reads the group's blocking rows only, not every pending row of the group. With a status list
 * compared by `IN`, MariaDB's look-up stopped at the group key and read the whole group for each
 * polled row of it: a poll of 100 rows of a group 300 deep read 30,000 index entries.
 */
import type mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer } from 'outboxer';
import { mysql2, mysqlDialect } from 'outboxer/mysql2';
import { mariadbFixture } from '../support/databases.js';

const TABLE = 'group_probe';
const table = { schema: undefined, name: TABLE };
const DEPTH = 300;

interface PlanRow {
  readonly select_type: string;
  readonly key: string | null;
  readonly r_rows: number | string | null;
}

describe('MariaDB, the poll of a deep group', () => {
  let fixture: Awaited<ReturnType<typeof mariadbFixture>>;
  beforeAll(async () => {
    fixture = await mariadbFixture(2);
    const outboxer: Outboxer<mysql.PoolConnection> = new Outboxer({
      database: mysql2(fixture.pool),
      relay: false,
      outboxes: { o: { table: TABLE, partitions: 1 } },
    });
    await outboxer.migrate();
    await fixture.transaction((tx) =>
      outboxer.publishMany(
        tx,
        Array.from({ length: DEPTH }, (_, i) => ({ outbox: 'o', payload: { i }, groupKey: 'hot' })),
      ),
    );
    await fixture.pool.query(`ANALYZE TABLE \`${TABLE}\``);
  });
  afterAll(() => fixture.close());

  test.each([false, true])(
    'probes each polled row for its blocking statuses alone (parkDead %s)',
    async (parkDead) => {
      const poll = mysqlDialect.poll(table, {
        lease: { outbox: 'o', partition: 0, owner: 'node-1', epoch: 1 },
        ordering: 'group',
        limit: 100,
        afterId: 0,
        dueBefore: null,
        now: Date.now(),
        parkDead,
      });
      const [plan] = (await fixture.pool.query(`ANALYZE ${poll.text}`, [...poll.values])) as unknown as [
        PlanRow[],
      ];
      const probes = plan.filter((row) => row.select_type === 'DEPENDENT SUBQUERY');
      expect(probes.map((row) => row.key)).toEqual(Array(parkDead ? 2 : 1).fill(`${TABLE}_groups_status`));
      // Rows read per probe, on average: none of the group's 300 ready rows is blocking.
      for (const probe of probes) expect(Number(probe.r_rows)).toBeLessThanOrEqual(1);
      const result = poll.read((await fixture.query(poll.text, [...poll.values])) as never);
      expect(result.messages).toHaveLength(100);
      expect(result.messages.every((m) => !m.blocked)).toBe(true);
    },
  );
});
