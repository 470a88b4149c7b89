/**
 * Prune's tallies on Postgres: a batch tallies the rows its DELETE removed, once per outbox on
 * partition 0 (`<table>_prune()`), and the recount compares `delivered` per outbox, so neither two
 * pruners at once nor the per-partition tallies of the deliveries make a drift.
 */
import { afterAll, beforeAll, expect, test } from 'vitest';
import { Outboxer, type Counts } from 'outboxer';
import { postgresDialect } from 'outboxer/pg';
import { postgresFixture } from '../support/databases.js';

let fixture: Awaited<ReturnType<typeof postgresFixture>>;
beforeAll(async () => {
  fixture = await postgresFixture();
});
afterAll(() => fixture.close());

const figuresOf = ({ pending, dead, delivered, orphaned }: Counts) => ({
  pending,
  dead,
  delivered,
  orphaned,
});
const table = `pruned_tallies_${process.pid}`;

test('prune tallies the rows it deletes once per outbox, even with two pruners at once, and the recount agrees', async () => {
  const pruners = [0, 1].map(
    () =>
      new Outboxer({
        database: fixture.database,
        outboxes: { o: { table, partitions: 4, retention: { keep: 3600 } } },
        relay: false,
      }) as Outboxer<never, boolean>,
  );
  await pruners[0]!.migrate();
  await fixture.query(
    `INSERT INTO "${table}_config" (outbox, partitions, ordering, serialize_writes, recounted_at) VALUES ('o', 4, 'group', false, now() - interval '1 hour')`,
  );
  // 25,000 delivered rows across the four partitions (three prune batches), tallied as the
  // relay's settlement tallies them: per partition.
  await fixture.query(
    `WITH delivered AS (
         INSERT INTO "${table}" (outbox, partition, payload, status, delivered_at)
         SELECT 'o', g % 4, '1', 4, now() - interval '2 hours' - g * interval '1 millisecond' FROM generate_series(1, 25000) AS g
         RETURNING partition)
       INSERT INTO "${table}_tallies" (outbox, partition, pending, dead, delivered)
       SELECT 'o', partition, 0, 0, count(*) FROM delivered GROUP BY partition`,
  );
  expect((await pruners[1]!.counts('o')).delivered).toBe(25_000);
  const pruned = await Promise.all(pruners.map((p) => p.prune('o')));
  expect(pruned[0]! + pruned[1]!).toBe(25_000);
  expect(figuresOf(await pruners[0]!.counts('o'))).toEqual({
    pending: 0,
    dead: 0,
    delivered: 0,
    orphaned: 0,
  });
  // Each partition's tallies still hold its deliveries, partition 0's the pruned rows: the
  // recount compares delivered per outbox and has nothing to correct.
  const recount = postgresDialect.tallies!.recount({ schema: undefined, name: table }, 'o', 60_000);
  expect(recount.read(await fixture.query(recount.text, [...recount.values]))).toEqual({
    pending: 0,
    dead: 0,
    delivered: 0,
  });
  // A delivered row inserted by hand is a drift the recount corrects, on the outbox total.
  await fixture.query(
    `INSERT INTO "${table}" (outbox, partition, payload, status, delivered_at) VALUES ('o', 3, '1', 4, now())`,
  );
  await fixture.query(`UPDATE "${table}_config" SET recounted_at = now() - interval '1 hour'`);
  expect(recount.read(await fixture.query(recount.text, [...recount.values]))).toEqual({
    pending: 0,
    dead: 0,
    delivered: 1,
  });
  expect((await pruners[0]!.counts('o')).delivered).toBe(1);
});

test('a prune batch commits without waiting for its flush, for its own transaction only', async () => {
  const outboxer = new Outboxer({
    database: fixture.database,
    outboxes: { o: { table, retention: { keep: 3600 } } },
    relay: false,
  }) as Outboxer<never, boolean>;
  await outboxer.migrate();
  const batch = postgresDialect.prune({ schema: undefined, name: table }, 'o', 3600, 10_000, Date.now());
  const client = await fixture.pool.connect();
  try {
    const show = async () => (await client.query('SHOW synchronous_commit')).rows[0].synchronous_commit;
    expect(await show()).toBe('on');
    await client.query('BEGIN');
    for (const query of batch) await client.query(query.text, query.values as unknown[]);
    expect(await show()).toBe('off');
    await client.query('ROLLBACK');
    expect(await show()).toBe('on');
  } finally {
    client.release();
  }
});
