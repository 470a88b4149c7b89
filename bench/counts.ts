/**
 * Counts rows (part of the `poll` group): `counts()` on the million-row table against a full
 * grouped count(*) of it, with the tallies as the fill wrote them and with a relay's tick of
 * uncompacted ones. With BENCH_PLANS=1 also the plans of counts, the grouped count and the
 * acknowledge of a batch of 100 at that depth.
 */
import type { Outboxer } from 'outboxer';
import { queriesOf, readResults } from '../src/core/sql.js';
import { addRow, judge, plan } from './context.js';
import { table } from './database.js';
import { BIG, LEASE, type Ctx } from './poll-statement.js';
import { formatMs, times } from './report.js';
import { median, seconds } from './support.js';

async function timeMany(iterations: number, fn: () => Promise<unknown>): Promise<number> {
  const samples: number[] = [];
  await fn(); // warm-up
  for (let i = 0; i < iterations; i += 1) samples.push((await seconds(fn)).seconds * 1000);
  return median(samples);
}

/**
 * counts() against a full grouped count(*) of the same table: with the tallies as the fill wrote
 * them, then with a relay's tick of uncompacted ones; with BENCH_PLANS=1 the acknowledge's plan.
 */
export async function countsRows<Tx>(
  ctx: Ctx<Tx>,
  bigOutboxer: Outboxer<Tx>,
  big: number,
  cold: { coldOurs: number; coldGrouped: number },
): Promise<void> {
  const { db, settings } = ctx;
  const grouped = db.plain.groupedCount(BIG);
  const countIterations = settings.quick ? 2 : 7;
  const oursCounts = await timeMany(countIterations, () => bigOutboxer.counts('bench'));
  const groupedMs = await timeMany(countIterations, () => db.query(grouped.text, grouped.values));
  const exact = await bigOutboxer.counts('bench');
  if (exact.pending !== big || !exact.exact)
    throw new Error(`counts() disagrees with the rows: ${exact.pending} of ${big}`);
  ctx.figures.set('counts.ours', oursCounts);
  const [tallies] = await db.query(`SELECT count(*) AS n FROM ${db.quote(`${BIG}_tallies`)}`);
  addRow(ctx, {
    group: 'Counts',
    what: `\`counts()\` on ${big.toLocaleString('en-US')} rows`,
    ours: { value: oursCounts, unit: 'ms' },
    limit: {
      label: 'SELECT outbox, status, count(*) … GROUP BY outbox, status',
      figure: { value: groupedMs, unit: 'ms' },
    },
    ofLimit: `${times(groupedMs / oursCounts)} faster`,
    target: {
      text: '≥ 5× faster than the grouped count(*)',
      measured: times(groupedMs / oursCounts),
      met: judge(ctx, groupedMs / oursCounts >= 5),
    },
    spec: '125 ms',
    note: `Exact: the sum of the outbox's tallies (${Number(tallies?.n)} rows, as the fill's statements wrote them; the relays compact them to one a partition), which every statement that changes a figure writes with its change. Median of ${countIterations}. The grouped count(*) after the table was vacuumed or analyzed; right after the bulk insert: counts() ${formatMs(cold.coldOurs)} ms, grouped count(*) ${formatMs(cold.coldGrouped)} ms.`,
  });
  // A tick's worth of publishes and acknowledges between two compactions (every leaseTimeout / 3,
  // 10 s by default): 20,000 tallies that sum to nothing.
  const UNCOMPACTED = settings.quick ? 200 : 20_000;
  const zero = db.plain.zeroTallies(BIG, 'bench', UNCOMPACTED);
  await db.query(zero.text, zero.values);
  await db.vacuum(`${BIG}_tallies`);
  const uncompactedCounts = await timeMany(countIterations, () => bigOutboxer.counts('bench'));
  if ((await bigOutboxer.counts('bench')).pending !== big)
    throw new Error('counts() disagrees with the rows');
  addRow(ctx, {
    group: 'Counts',
    what: `\`counts()\` on ${big.toLocaleString('en-US')} rows, ${UNCOMPACTED.toLocaleString('en-US')} tallies not yet compacted`,
    ours: { value: uncompactedCounts, unit: 'ms' },
    limit: { label: 'the same grouped count(*)', figure: { value: groupedMs, unit: 'ms' } },
    ofLimit: `${times(groupedMs / uncompactedCounts)} faster`,
    target: {
      text: '≥ 5× faster than the grouped count(*)',
      measured: times(groupedMs / uncompactedCounts),
      met: judge(ctx, groupedMs / uncompactedCounts >= 5),
    },
    note: `${UNCOMPACTED.toLocaleString('en-US')} tally rows summing to zero, as ten seconds of publishing and acknowledging at 1,000 transactions a second each leave between two compactions. Median of ${countIterations}.`,
  });
  await plan(ctx, `counts() as in src/, ${big} rows`, db.dialect.counts(table(BIG), 'bench', 1));
  await plan(ctx, `Grouped count(*), ${big} rows`, grouped);
  if (settings.plans) {
    // The acknowledge of a batch of 100 at a million rows, fenced on a lease taken as a worker does.
    const adapter = db.adapter();
    const acquire = db.dialect.acquireLease(table(BIG), {
      now: Date.now(),
      outbox: 'bench',
      partition: 0,
      owner: 'bench',
      ttl: 3_600_000,
    });
    const epoch = readResults(acquire, await adapter.executeAtomically(queriesOf(acquire)));
    const ids = await db.query(
      `SELECT id FROM ${db.quote(BIG)} WHERE outbox = 'bench' AND status = 0 ORDER BY id LIMIT 100`,
    );
    const statements = queriesOf(
      db.dialect.settle(table(BIG), {
        lease: { ...LEASE, epoch: epoch ?? 1 },
        now: Date.now(),
        delivered: ids.map((r) => Number(r.id)),
        failed: [],
        unblockedGroups: [],
        keep: false,
        ttl: 30_000,
        parkDead: false,
      }),
    );
    // On Postgres the common case is one statement: the lease renewal and the fenced DELETE in
    // one CTE; on MySQL a transaction of several, planned in turn.
    await plan(
      ctx,
      `Acknowledge (${statements.length === 1 ? 'one statement: lease renewal and fenced DELETE of 100' : `${statements.length} statements in one transaction: lease renewal, lock, tally, DELETE of 100`}), ${big} rows`,
      db.kind === 'postgres' ? statements.slice(0, 1) : statements,
    );
    await db.query(`DELETE FROM ${db.quote(`${BIG}_leases`)}`);
  }
}
