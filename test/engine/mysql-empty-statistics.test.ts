/**
 * MariaDB with the statistics of an empty table (the state of a drained outbox, until InnoDB
 * recalculates them) and rows in it: the relay's statements still read their own rows by their
 * indexes. With such statistics the optimizer read a settle's `id IN (…)` by a scan of the whole
 * table, so its `SELECT … FOR UPDATE` and `DELETE` locked every row they stepped over, other
 * partitions' in-flight rows included: two partitions settling at once waited on each other and
 * deadlocked. And it read the poll's ready rows by `_status` across partitions, probing each row's
 * group by a scan of the outbox: seconds per poll. Both found by `BENCH_DB=mysql npm run bench`.
 */
import type mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, hashGroupKey } from 'outboxer';
import { mysql2, mysqlDialect } from 'outboxer/mysql2';
import { queriesOf } from '../../src/core/sql.js';
import { mariadbFixture } from '../support/databases.js';

const TABLE = 'settle_locks';
const PARTITIONS = 4;
const table = { schema: undefined, name: TABLE };

/** A group key of `partition`, the n-th found. */
function keyOf(partition: number, n: number): string {
  let found = -1;
  for (let k = 0; ; k += 1) {
    if (hashGroupKey(`g:${k}`) % PARTITIONS === partition && ++found === n) return `g:${k}`;
  }
}

describe('MariaDB, statistics of an empty table, rows in it', () => {
  let fixture: Awaited<ReturnType<typeof mariadbFixture>>;
  let outboxer: Outboxer<mysql.PoolConnection>;
  beforeAll(async () => {
    fixture = await mariadbFixture(4);
    outboxer = new Outboxer({
      database: mysql2(fixture.pool),
      relay: false,
      outboxes: { bench: { table: TABLE, partitions: PARTITIONS } },
    });
    await outboxer.migrate();
    // Statistics of the empty table, kept while the rows arrive (no background recalculation).
    await fixture.pool.query(`ALTER TABLE \`${TABLE}\` STATS_AUTO_RECALC = 0`);
    await fixture.pool.query(`ANALYZE TABLE \`${TABLE}\``);
    // Rows of partitions 0 and 1 interleaved by id: a scan for partition 0's ids crosses partition 1's.
    await fixture.transaction((tx) =>
      outboxer.publishMany(
        tx,
        Array.from({ length: 200 }, (_, i) => ({
          outbox: 'bench',
          payload: { i },
          groupKey: keyOf(i % 2, Math.floor(i / 2)),
        })),
      ),
    );
    const [stats] = (await fixture.pool.query(
      `SELECT n_rows FROM mysql.innodb_table_stats WHERE database_name = DATABASE() AND table_name = ?`,
      [TABLE],
    )) as unknown as [Array<{ n_rows: number }>];
    expect(stats[0]?.n_rows).toBe(0);
  });
  afterAll(() => fixture.close());

  test('the poll reads its ready rows by `_ready`, retries by `_retry` and probes each group by `_groups_status`', async () => {
    for (const ordering of ['group', 'total'] as const) {
      const poll = mysqlDialect.poll(table, {
        lease: { outbox: 'bench', partition: 1, owner: 'node-1', epoch: 1 },
        ordering,
        limit: 100,
        afterId: 0,
        dueBefore: null,
        now: Date.now(),
        parkDead: false,
      });
      const [plan] = (await fixture.pool.query(`EXPLAIN ${poll.text}`, [...poll.values])) as unknown as [
        Array<{ table: string | null; type: string; key: string | null; select_type: string }>,
      ];
      const reads = plan.filter((row) => row.table !== null && row.table !== '<union1,2>');
      // No scan of the table or of a whole index.
      expect(reads.map((row) => row.type)).not.toContain('ALL');
      expect(reads.map((row) => row.type)).not.toContain('index');
      if (ordering === 'group')
        expect(reads.map((row) => `${row.select_type} ${row.key}`)).toEqual([
          `PRIMARY ${TABLE}_retry`,
          `UNION ${TABLE}_ready`,
          `DEPENDENT SUBQUERY ${TABLE}_groups_status`,
        ]);
      else expect(reads.map((row) => row.key)).toContain(`${TABLE}_ready`);
    }
  });

  test("two partitions settle at once, neither waiting for the other's rows", async () => {
    const [rows] = (await fixture.pool.query(
      `SELECT id, \`partition\` FROM \`${TABLE}\` ORDER BY id`,
    )) as unknown as [Array<{ id: number; partition: number }>];
    const ids = (p: number) => rows.filter((r) => r.partition === p).map((r) => Number(r.id));
    const settle = (partition: number) =>
      queriesOf(
        mysqlDialect.settle(table, {
          lease: { outbox: 'bench', partition, owner: `node-${partition}`, epoch: 1 },
          now: Date.now(),
          delivered: ids(partition),
          failed: [],
          unblockedGroups: [],
          keep: false,
          ttl: 30_000,
          parkDead: false,
        }),
      );
    await fixture.pool.query(
      `INSERT INTO \`${TABLE}_leases\` (outbox, \`partition\`, owner, epoch, lease_until) VALUES ('bench', 0, 'node-0', 1, 0), ('bench', 1, 'node-1', 1, 0)`,
    );

    const first = await fixture.pool.getConnection();
    const second = await fixture.pool.getConnection();
    try {
      // The engine's transactions run at READ COMMITTED (see the mysql2 adapter).
      for (const connection of [first, second]) {
        await connection.query('SET SESSION innodb_lock_wait_timeout = 1');
        await connection.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
        await connection.beginTransaction();
      }
      // Partition 1's settle, not yet committed, holds its rows.
      for (const query of settle(1)) await first.query(query.text, [...query.values]);
      // Partition 0's settle meanwhile: it must not wait for any of them (a wait fails on the
      // server's lock wait timeout: ER_LOCK_WAIT_TIMEOUT).
      for (const query of settle(0)) await second.query(query.text, [...query.values]);
      await second.commit();
      await first.commit();
    } finally {
      for (const connection of [first, second]) {
        await connection.rollback().catch(() => undefined);
        connection.release();
      }
    }
    const [left] = (await fixture.pool.query(`SELECT count(*) AS n FROM \`${TABLE}\``)) as unknown as [
      Array<{ n: number }>,
    ];
    expect(Number(left[0]?.n)).toBe(0);
    expect(await outboxer.counts('bench')).toMatchObject({ pending: 0 });
  });
});
