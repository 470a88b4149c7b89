/**
 * MariaDB: a partition's settle locks its own rows only, even when the table's statistics say it
 * is empty (the state of a drained outbox, until InnoDB recalculates them). With such statistics
 * the optimizer read `id IN (…)` by a scan of the whole table, so the settle's `SELECT … FOR
 * UPDATE` and its `DELETE` locked every row they stepped over, rows of other partitions in flight
 * included: two partitions settling at once waited on each other and deadlocked (found by the
 * 4-partition relay row of `BENCH_DB=mysql npm run bench`).
 */
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

describe('MariaDB: a settle locks only its own rows', () => {
  let fixture: Awaited<ReturnType<typeof mariadbFixture>>;
  beforeAll(async () => {
    fixture = await mariadbFixture(4);
  });
  afterAll(() => fixture.close());

  test("two partitions settle at once on a table whose statistics say it is empty, neither waiting for the other's rows", async () => {
    const outboxer = new Outboxer({
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
