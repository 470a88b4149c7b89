/**
 * SQLite's tallies (`<table>_tallies`, kept by triggers on the message table): after every kind of
 * change, rolled-back and hand-written ones included, each tally equals a grouped count of the
 * rows, and so do `counts()`, the partitions' backlog and `blockedGroupCounts()`, which read them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, batchRelay } from 'outboxer';
import {
  engineFixtures,
  publishInTransaction,
  reportSkippedFixtures,
  type EngineFixture,
} from '../support/databases.js';

reportSkippedFixtures('sqlite tallies');

/** The rows grouped as the tallies are, and the tallies that are not zero, in the same order. */
async function talliesAndRows(fixture: EngineFixture, table: string) {
  const order = 'ORDER BY outbox, partition, status, grouped';
  const rows = await fixture.query(
    `SELECT outbox, partition, status, group_key IS NOT NULL AS grouped, count(*) AS n FROM "${table}" GROUP BY 1, 2, 3, 4 ${order}`,
  );
  const tallies = await fixture.query(
    `SELECT outbox, partition, status, grouped, n FROM "${table}_tallies" WHERE n <> 0 ${order}`,
  );
  const plain = (list: Record<string, unknown>[]) => list.map((r) => Object.values(r).map(String).join(' '));
  return { rows: plain(rows), tallies: plain(tallies) };
}

let tables = 0;

describe.each(engineFixtures.filter((f) => f.name === 'sqlite' || f.name === 'node_sqlite'))(
  'tallies on $name',
  ({ make }) => {
    let fixture: EngineFixture;
    beforeAll(async () => {
      fixture = await make();
    });
    afterAll(() => fixture.close());

    test('exact through publish, a rolled-back publish, retry, dead (parked), retryDead, delivery, discard, prune and SQL by hand', async () => {
      const table = `lite_tallied_${++tables}`;
      let failing = true;
      const outboxer = new Outboxer({
        database: fixture.database,
        testing: 'manual',
        logger: false,
        outboxes: {
          o: {
            table,
            partitions: 3,
            maxAttempts: 2,
            onDead: 'park',
            retention: { keep: 3600 },
            relay: batchRelay(async (batch) =>
              batch.map((m) =>
                failing && String(m.payload).startsWith('flaky')
                  ? { ok: false, error: new Error('refused') }
                  : { ok: true },
              ),
            ),
          },
        },
      }) as Outboxer<never, boolean>;
      await outboxer.migrate();
      const count = async (where: string) =>
        Number((await fixture.query(`SELECT count(*) AS n FROM "${table}" WHERE ${where}`))[0]!.n);
      const same = async (what: string) => {
        const { rows, tallies } = await talliesAndRows(fixture, table);
        expect(tallies, what).toEqual(rows);
        expect(await outboxer.counts('o'), what).toMatchObject({
          pending: await count('status < 3'),
          dead: await count('status = 3'),
          delivered: await count('status = 4'),
          orphaned: 0,
          exact: true,
        });
        const backlog = await fixture.query(
          `SELECT partition, count(*) AS n FROM "${table}" WHERE status < 3 GROUP BY partition`,
        );
        for (const p of await outboxer.partitions('o')) {
          const row = backlog.find((r) => Number(r.partition) === p.partition);
          expect(p.backlog, `${what}: partition ${p.partition}`).toBe(Number(row?.n ?? 0));
        }
        expect(await outboxer.blockedGroupCounts('o'), what).toEqual({
          retrying: await count('status = 1 AND group_key IS NOT NULL'),
          parked: await count('status = 3 AND group_key IS NOT NULL'),
          exact: true,
        });
      };
      const inputs = (prefix: string, n: number, grouped = true) =>
        Array.from({ length: n }, (_, i) => ({
          outbox: 'o',
          payload: `${prefix}${i}`,
          groupKey: grouped ? `${prefix}-g${i % 5}` : null,
        }));

      await publishInTransaction(fixture, outboxer, inputs('ok', 30));
      await publishInTransaction(fixture, outboxer, inputs('plain', 4, false));
      await publishInTransaction(fixture, outboxer, inputs('gone', 12), { rollback: true });
      await publishInTransaction(fixture, outboxer, inputs('flaky', 3));
      await same('published');
      expect((await outboxer.counts('o')).pending).toBe(37);

      await outboxer.drain('o', { maxRounds: 1 });
      expect((await outboxer.blockedGroupCounts('o')).retrying).toBe(3);
      await same('retrying');
      await outboxer.drain('o');
      expect(await outboxer.blockedGroupCounts('o')).toEqual({ retrying: 0, parked: 3, exact: true });
      await same('dead, parked');

      const [first] = await outboxer.listDead('o');
      expect(await outboxer.retryDead('o', { ids: [first!.id] })).toBe(1);
      await same('one revived');
      failing = false;
      expect(await outboxer.retryDead('o')).toBe(2);
      await outboxer.drain('o');
      await same('redelivered');
      expect((await outboxer.counts('o')).dead).toBe(0);

      failing = true;
      await publishInTransaction(fixture, outboxer, inputs('flaky', 1));
      await outboxer.drain('o');
      const [dead] = await outboxer.listDead('o');
      expect(await outboxer.discard('o', [dead!.id])).toBe(1);
      await same('discarded a dead message');
      await publishInTransaction(fixture, outboxer, inputs('late', 2));
      const [pending] = await outboxer.listPending('o');
      expect(await outboxer.discard('o', [pending!.id])).toBe(1);
      await same('discarded a pending message');

      await fixture.query(
        `UPDATE "${table}" SET delivered_at = ${Date.now() - 7_200_000} WHERE status = 4 AND id % 2 = 0`,
      );
      expect(await outboxer.prune('o')).toBeGreaterThan(0);
      await same('pruned');

      // SQL by hand is tallied too: the triggers belong to the table, not to outboxer's statements.
      await fixture.query(`UPDATE "${table}" SET status = 3 WHERE status = 0`);
      await fixture.query(`UPDATE "${table}" SET partition = 2 WHERE status = 3 AND id % 2 = 1`);
      await fixture.query(`UPDATE "${table}" SET group_key = NULL WHERE status = 3 AND id % 3 = 0`);
      await fixture.query(`DELETE FROM "${table}" WHERE status = 4 AND id % 3 = 0`);
      await same('changed by hand');
      await outboxer.close();
    });

    test('migrate() fills the tallies of a table that had none, and forgets those of a table dropped and created again', async () => {
      const table = `lite_tallied_${++tables}`;
      const make = () =>
        new Outboxer({
          database: fixture.database,
          relay: false,
          logger: false,
          outboxes: { o: { table, partitions: 2 } },
        }) as Outboxer<never, boolean>;
      const outboxer = make();
      await outboxer.migrate();
      await publishInTransaction(fixture, outboxer, [
        { outbox: 'o', payload: 1, groupKey: 'a' },
        { outbox: 'o', payload: 2, groupKey: null },
        { outbox: 'o', payload: 3, groupKey: 'b' },
      ]);
      // As a version before tallies left it: rows, no tally table, no triggers.
      for (const trigger of ['insert', 'delete', 'update']) {
        await fixture.query(`DROP TRIGGER "${table}_tally_${trigger}"`);
      }
      await fixture.query(`DROP TABLE "${table}_tallies"`);
      await fixture.query(`UPDATE "${table}" SET status = 3 WHERE payload = '1'`);
      await make().migrate();
      const { rows, tallies } = await talliesAndRows(fixture, table);
      expect(tallies).toEqual(rows);
      expect(await outboxer.counts('o')).toMatchObject({ pending: 2, dead: 1 });

      // Dropped and created again: the old rows' tallies go with them.
      await fixture.query(`DROP TABLE "${table}"`);
      await make().migrate();
      expect(await outboxer.counts('o')).toMatchObject({ pending: 0, dead: 0, delivered: 0 });
      await publishInTransaction(fixture, outboxer, [{ outbox: 'o', payload: 4, groupKey: 'c' }]);
      expect(await outboxer.counts('o')).toMatchObject({ pending: 1 });
      await outboxer.close();
    });
  },
);
