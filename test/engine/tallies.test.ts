/**
 * `counts()` against the rows themselves. On Postgres it sums tallies that every statement
 * changing a figure writes with it (`<table>_tallies`), compacted and recounted by the node
 * holding partition 0; on SQLite it counts the rows. Either way each figure must equal a count of
 * the table after every kind of change, rolled-back ones included.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, batchRelay, type Counts, type Logger } from 'outboxer';
import { postgresDialect } from 'outboxer/pg';
import {
  engineFixtures,
  mariadbFixture,
  reportSkippedFixtures,
  postgresFixture,
  publishInTransaction,
  type EngineFixture,
} from '../support/databases.js';
import { sleep, waitUntil } from '../support/random.js';

type Figures = Pick<Counts, 'pending' | 'dead' | 'delivered' | 'orphaned'>;

/** The figures as a grouped count of the rows, `partitions` as recorded. */
async function rowFigures(fixture: EngineFixture, table: string, partitions: number): Promise<Figures> {
  const [row] = await fixture.query(
    `SELECT
      count(CASE WHEN status < 3 THEN 1 END) AS pending,
      count(CASE WHEN status = 3 THEN 1 END) AS dead,
      count(CASE WHEN status = 4 THEN 1 END) AS delivered,
      count(CASE WHEN status < 3 AND "partition" >= ${partitions} THEN 1 END) AS orphaned
    FROM "${table}" WHERE outbox = 'o'`,
  );
  return {
    pending: Number(row!.pending),
    dead: Number(row!.dead),
    delivered: Number(row!.delivered),
    orphaned: Number(row!.orphaned),
  };
}

function figuresOf(counts: Counts): Figures {
  const { pending, dead, delivered, orphaned } = counts;
  return { pending, dead, delivered, orphaned };
}

let tables = 0;

describe.each(engineFixtures)('counts() equals the rows on $name', ({ make }) => {
  let fixture: EngineFixture;
  beforeAll(async () => {
    fixture = await make();
  });
  afterAll(() => fixture.close());

  test('after publish, rollback, delivery, retry, dead-lettering, retryDead, discard and prune', async () => {
    const table = `tallied_${++tables}`;
    // Payloads "dies…" fail for good (one attempt); "flaky…" fail once per attempt until revived.
    let failing = true;
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: {
        o: {
          table,
          partitions: 3,
          maxAttempts: 2,
          backoff: { min: 1, max: 5 },
          retention: { keep: 3600 },
          pollInterval: 20,
          relay: batchRelay(async (batch) =>
            batch.map((m) =>
              String(m.payload).startsWith('dies') || (failing && String(m.payload).startsWith('flaky'))
                ? { ok: false, error: new Error('refused') }
                : { ok: true },
            ),
          ),
        },
      },
      leaseTimeout: 600,
    }) as Outboxer<never, boolean>;
    await outboxer.migrate();
    const same = async (what: string) => {
      expect(figuresOf(await outboxer.counts('o')), what).toEqual(await rowFigures(fixture, table, 3));
    };
    const inputs = (prefix: string, count: number) =>
      Array.from({ length: count }, (_, i) => ({
        outbox: 'o',
        payload: `${prefix}${i}`,
        groupKey: `g${i % 7}`,
      }));

    await publishInTransaction(fixture, outboxer, inputs('ok', 40));
    await publishInTransaction(fixture, outboxer, inputs('gone', 15), { rollback: true });
    await publishInTransaction(fixture, outboxer, inputs('dies', 3));
    await publishInTransaction(fixture, outboxer, inputs('flaky', 2));
    await publishInTransaction(fixture, outboxer, inputs('one', 1));
    await same('published');
    expect((await outboxer.counts('o')).pending).toBe(46);

    await outboxer.start();
    try {
      // Everything delivered but the 5 that failed twice: dead.
      const settled = (dead: number) => async () => {
        const figures = await rowFigures(fixture, table, 3);
        return figures.dead === dead && figures.pending === 0;
      };
      await waitUntil(settled(5), 20_000, 'the dead');
      await outboxer.stop();
      await same('delivered and dead');
      failing = false;
      expect(await outboxer.retryDead('o')).toBe(5);
      await same('revived');
      await outboxer.start();
      await waitUntil(settled(3), 20_000, 'redelivery');
      await outboxer.stop();
      await same('redelivered');
      const dead = await outboxer.listDead('o');
      expect(await outboxer.discard('o', [dead[0]!.id])).toBe(1);
      await same('discarded a dead message');
      await publishInTransaction(fixture, outboxer, inputs('late', 4));
      const pending = await outboxer.listPending('o');
      expect(await outboxer.discard('o', [pending[0]!.id])).toBe(1);
      await same('discarded a pending message');
      const hoursAgo = fixture.kind === 'postgres' ? "now() - interval '2 hours'" : Date.now() - 7_200_000;
      await fixture.query(`UPDATE "${table}" SET delivered_at = ${hoursAgo} WHERE status = 4`);
      expect(await outboxer.prune('o')).toBeGreaterThan(0);
      await same('pruned');
      const final = await outboxer.counts('o');
      expect(final).toMatchObject({ pending: 3, dead: 2, delivered: 0, exact: true });
    } finally {
      await outboxer.stop();
    }
  });
});

type ServerFixture = Awaited<ReturnType<typeof postgresFixture>> | Awaited<ReturnType<typeof mariadbFixture>>;

describe.each([
  { name: 'postgres', make: (): Promise<ServerFixture> => postgresFixture() },
  { name: 'mariadb', make: (): Promise<ServerFixture> => mariadbFixture() },
])('tallies on $name', ({ name, make }) => {
  let fixture: ServerFixture;
  beforeAll(async () => {
    fixture = await make();
  });
  /** `count` message rows of `partition` inserted by hand: no statement of outboxer tallies them. */
  const insertByHand = (table: string, count: number, partition: number) =>
    fixture.kind === 'mysql'
      ? fixture.query(
          `INSERT INTO "${table}" (outbox, "partition", payload, inserted_at) SELECT 'o', ?, '1', 0 FROM seq_1_to_${count}`,
          [partition],
        )
      : fixture.query(
          `INSERT INTO "${table}" (outbox, partition, payload) SELECT 'o', $1::int, '1' FROM generate_series(1, ${count}) AS g`,
          [partition],
        );
  /** The Postgres fixture, for the tests only Postgres runs. */
  const postgres = () => fixture as Awaited<ReturnType<typeof postgresFixture>>;
  afterAll(() => fixture.close());

  const warnings: Array<{ message: string; context?: Record<string, unknown> }> = [];
  const logger: Logger = {
    debug: () => {},
    info: () => {},
    warn: (message, context) => void warnings.push({ message, ...(context ? { context } : {}) }),
    error: () => {},
  };

  function instance(table: string, options: { recountInterval?: number; relayed?: string[] } = {}) {
    return new Outboxer({
      database: fixture.database,
      outboxes: {
        o: {
          table,
          partitions: 2,
          pollInterval: 20,
          ...(options.recountInterval === undefined ? {} : { recountInterval: options.recountInterval }),
          relay: batchRelay(async (batch) => {
            options.relayed?.push(...batch.map((m) => String(m.payload)));
            return batch.map(() => ({ ok: true as const }));
          }),
        },
      },
      leaseTimeout: 600,
      logger,
    }) as Outboxer<never, boolean>;
  }

  const tallyRows = async (table: string) =>
    (
      await fixture.query(`SELECT "partition", count(*) AS n FROM "${table}_tallies" GROUP BY "partition"`)
    ).map((row) => ({ partition: Number(row.partition), n: Number(row.n) }));

  test('counts() reads the tallies, not the rows: a row deleted by hand is counted until a recount', async () => {
    const table = `tallied_${++tables}`;
    const publisher = new Outboxer({
      database: fixture.database,
      outboxes: { o: { table, partitions: 2 } },
      relay: false,
    }) as Outboxer<never, boolean>;
    await publisher.migrate();
    await publishInTransaction(fixture, publisher, [
      { outbox: 'o', payload: 1 },
      { outbox: 'o', payload: 2 },
    ]);
    await fixture.query(`DELETE FROM "${table}" WHERE id = (SELECT min(id) FROM "${table}")`);
    expect((await publisher.counts('o')).pending).toBe(2);

    // The node holding partition 0 recounts every recountInterval, and logs what it corrected.
    warnings.length = 0;
    const relayed: string[] = [];
    const relay = instance(table, { relayed, recountInterval: 1000 });
    await relay.start();
    try {
      await waitUntil(() => relayed.length === 1, 10_000, 'delivery');
      // The recount commits, then its node logs it: wait for both (a poll of counts() can see the
      // first before the second has run).
      await waitUntil(
        async () =>
          (await publisher.counts('o')).pending === 0 && warnings.some((w) => /recounted/.test(w.message)),
        10_000,
        'the recount',
      );
      expect(warnings.find((w) => /recounted/.test(w.message))?.context).toMatchObject({
        correctedBy: { pending: -1, dead: 0, delivered: 0 },
      });
    } finally {
      await relay.stop();
    }
  });

  test('two relaying nodes correct a change by hand once, every recountInterval, and keep one tally a partition', async () => {
    const table = `tallied_${++tables}`;
    const nodes = [instance(table, { recountInterval: 1000 }), instance(table, { recountInterval: 1000 })];
    await nodes[0]!.migrate();
    await Promise.all(nodes.map((n) => n.start()));
    try {
      for (let round = 0; round < 20; round++) {
        await publishInTransaction(
          fixture,
          nodes[round % 2]!,
          Array.from({ length: 5 }, (_, i) => ({ outbox: 'o', payload: i, groupKey: `g${i}` })),
        );
      }
      await waitUntil(async () => (await nodes[0]!.counts('o')).pending === 0, 10_000, 'the drain');
      // Rows no statement of outboxer tallied, in a partition no worker reads (so they stay):
      // counted only once a recount finds them.
      await insertByHand(table, 6, 5);
      expect((await nodes[1]!.counts('o')).pending).toBe(0);
      await waitUntil(async () => (await nodes[1]!.counts('o')).pending === 6, 10_000, 'the recount');
      // Several recounts later, still exactly the rows: no node corrected twice.
      await sleep(2500);
      expect(figuresOf(await nodes[0]!.counts('o'))).toEqual(await rowFigures(fixture, table, 2));
      expect(await nodes[0]!.counts('o')).toMatchObject({ pending: 6, orphaned: 6 });
      await waitUntil(
        async () => (await tallyRows(table)).every((r) => r.n === 1),
        5_000,
        'compaction to one tally a partition',
      );
    } finally {
      await Promise.all(nodes.map((n) => n.stop()));
    }
  });

  test.skipIf(name === 'mariadb')(
    'two recounts at once add the difference once: the second waits for the first and finds its claim gone',
    async () => {
      const table = `tallied_${++tables}`;
      const outboxer = instance(table);
      await outboxer.migrate();
      await fixture.query(
        `INSERT INTO "${table}_config" (outbox, partitions, ordering, serialize_writes, recounted_at) VALUES ('o', 2, 'group', false, now() - interval '1 hour')`,
      );
      await fixture.query(
        `INSERT INTO "${table}" (outbox, partition, payload) SELECT 'o', g % 2, '1' FROM generate_series(1, 5) AS g`,
      );
      const statement = postgresDialect.tallies!.recount({ schema: undefined, name: table }, 'o', 60_000);
      for (const isolation of ['READ COMMITTED', 'REPEATABLE READ']) {
        await fixture.query(`UPDATE "${table}_config" SET recounted_at = now() - interval '1 hour'`);
        await fixture.query(`INSERT INTO "${table}" (outbox, partition, payload) VALUES ('o', 0, '1')`);
        const [first, second] = [await postgres().pool.connect(), await postgres().pool.connect()];
        try {
          await first.query('BEGIN');
          await second.query(`BEGIN ISOLATION LEVEL ${isolation}`);
          await second.query('SELECT 1'); // its snapshot, taken before the first commits
          const found = (await first.query(statement.text, statement.values as unknown[])).rows;
          const waiting = second.query(statement.text, statement.values as unknown[]).then(
            (r) => r.rows,
            (error: unknown) => error as Error,
          );
          await sleep(200);
          await first.query('COMMIT');
          const outcome = await waiting;
          await second.query(outcome instanceof Error ? 'ROLLBACK' : 'COMMIT');
          expect(found).toHaveLength(1);
          if (isolation === 'READ COMMITTED') expect(outcome).toEqual([]);
          else expect(String(outcome)).toMatch(/could not serialize/);
        } finally {
          first.release();
          second.release();
        }
        expect(figuresOf(await outboxer.counts('o'))).toEqual(await rowFigures(fixture, table, 2));
      }
      expect((await outboxer.counts('o')).pending).toBe(7);
    },
  );

  test.skipIf(name === 'mariadb')(
    'TRUNCATE empties the tallies; a table dropped and migrated again starts from its rows',
    async () => {
      const table = `tallied_${++tables}`;
      const outboxer = instance(table);
      await outboxer.migrate();
      await publishInTransaction(fixture, outboxer, [{ outbox: 'o', payload: 1 }]);
      await fixture.query(`TRUNCATE "${table}"`);
      expect((await outboxer.counts('o')).pending).toBe(0);

      await publishInTransaction(fixture, outboxer, [{ outbox: 'o', payload: 1 }]);
      await fixture.query(`DROP TABLE "${table}"`);
      await outboxer.migrate();
      expect((await outboxer.counts('o')).pending).toBe(0);
    },
  );

  test.skipIf(name === 'mariadb')(
    'migrate() on a table without tallies (an older version) counts the rows already there',
    async () => {
      const table = `tallied_${++tables}`;
      const outboxer = instance(table);
      await outboxer.migrate();
      await publishInTransaction(
        fixture,
        outboxer,
        Array.from({ length: 7 }, (_, i) => ({ outbox: 'o', payload: i, groupKey: `g${i}` })),
      );
      await fixture.query(`UPDATE "${table}" SET status = 3 WHERE id = (SELECT min(id) FROM "${table}")`);
      await fixture.query(`DROP TABLE "${table}_tallies"`);
      await outboxer.migrate();
      expect(figuresOf(await outboxer.counts('o'))).toEqual({
        pending: 6,
        dead: 1,
        delivered: 0,
        orphaned: 0,
      });
    },
  );

  test('a tally commits or rolls back with its change: concurrent publishers, rollbacks and a draining relay', async () => {
    const table = `tallied_${++tables}`;
    const outboxer = instance(table, { recountInterval: 3_600_000 });
    await outboxer.migrate();
    await outboxer.start();
    warnings.length = 0;
    try {
      await Promise.all(
        Array.from({ length: 6 }, async (_, writer) => {
          for (let i = 0; i < 30; i++) {
            await publishInTransaction(
              fixture,
              outboxer,
              Array.from({ length: 1 + (i % 4) }, (_, k) => ({
                outbox: 'o',
                payload: k,
                groupKey: `w${writer}:${k}`,
              })),
              { rollback: i % 5 === 0 },
            );
            if (i % 10 === 0) await outboxer.counts('o');
          }
        }),
      );
      await waitUntil(async () => (await rowFigures(fixture, table, 2)).pending === 0, 20_000, 'the drain');
      expect(figuresOf(await outboxer.counts('o'))).toEqual({
        pending: 0,
        dead: 0,
        delivered: 0,
        orphaned: 0,
      });
      // No recount ran (the first is due an hour after the relay's start) nor was needed.
      expect(warnings.filter((w) => /recounted/.test(w.message))).toEqual([]);
    } finally {
      await outboxer.stop();
    }
  });
});

reportSkippedFixtures('counts() equals the rows');
