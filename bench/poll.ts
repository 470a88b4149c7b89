/**
 * One poll at different depths of an unblocked backlog (the exact statement the worker runs, built
 * by the dialect), then the rest of the `poll` group in its order: counts() on a million rows
 * (bench/counts.ts), the polls of blocked states (bench/blocked-poll.ts) and prune
 * (bench/prune.ts). With BENCH_PLANS=1 also the plans of the poll, the acknowledge, counts and prune.
 */
import { addRow, judge, plan } from './context.js';
import { blockedRows, drainedPollRow } from './blocked-poll.js';
import { countsRows } from './counts.js';
import { BIG, GROUPS, pollFigures, pollStatement, publishOnly, type Ctx } from './poll-statement.js';
import { pruneRows } from './prune.js';
import { times } from './report.js';
import { rows, seconds } from './support.js';

/** The million-row table, which the memory row (bench/memory.ts) drains after the poll rows. */
export { BIG };

const SMALL = 'bench_poll';

export async function pollRows<Tx>(ctx: Ctx<Tx>): Promise<void> {
  const { db, settings } = ctx;
  const iterations = settings.quick ? 20 : 300;
  const prepare = async (name: string, count: number) => {
    await db.dropTables(name);
    await publishOnly(db, name).migrate();
    await db.fill({ table: name, outbox: 'bench', count, groups: GROUPS, partitions: 1 });
    return db.vacuum(name);
  };

  // --- 10,000 pending: the unblocked reference.
  const small = rows(settings, 10_000, 2_000);
  await prepare(SMALL, small);
  const smallFigures = await pollFigures(ctx, pollStatement(db, SMALL), iterations);
  const smallPoll = smallFigures.current;
  const plainPoll = await db.timeStatement(db.plain.head(SMALL), iterations);
  ctx.figures.set('poll.small', smallPoll.p50);
  ctx.figures.set('poll.small.server', smallFigures.currentServer);
  addRow(ctx, {
    group: 'Poll',
    what: `One poll, ${small.toLocaleString('en-US')} pending rows`,
    ours: { value: smallPoll.p50, unit: 'ms' },
    limit: {
      label: 'SELECT … ORDER BY id LIMIT 100 on the ready index',
      figure: { value: plainPoll.p50, unit: 'ms' },
    },
    ofLimit: times(smallPoll.p50 / plainPoll.p50),
    spec: '0.8 ms',
    note: `Median of ${iterations} runs of the worker's exact poll statement (batch 100, ordering 'group', cursor at 0), measured at the client (round trip, 100 rows parsed by the driver); ${smallFigures.describe()}.`,
  });
  await plan(ctx, `Poll, ${small} pending rows`, pollStatement(db, SMALL));
  await db.dropTables(SMALL);

  // --- Right after a drain, where the dialect keeps no cursor: the poll from the head steps over
  // the entries of the rows just deleted until the server's background upkeep removes them.
  if (!db.dialect.capabilities.pollCursor) await drainedPollRow(ctx, smallPoll.p50, iterations);

  // --- 1,000,000 pending: poll, counts, and the acknowledge plan. Kept for the memory row.
  const big = rows(settings, 1_000_000, 20_000);
  await db.dropTables(BIG);
  const bigOutboxer = publishOnly(db, BIG);
  await bigOutboxer.migrate();
  ctx.log(`  filling ${big.toLocaleString('en-US')} rows…`);
  const { seconds: fillSeconds } = await seconds(() =>
    db.fill({ table: BIG, outbox: 'bench', count: big, groups: GROUPS, partitions: 1 }),
  );
  const grouped = db.plain.groupedCount(BIG);
  // counts() right after a bulk insert, before any vacuum (no visibility map yet).
  const coldOurs = (await seconds(() => bigOutboxer.counts('bench'))).seconds * 1000;
  const coldGrouped = (await seconds(() => db.query(grouped.text, grouped.values))).seconds * 1000;
  const bigVacuum = await db.vacuum(BIG);
  const bigFigures = await pollFigures(ctx, pollStatement(db, BIG), iterations);
  const bigPoll = bigFigures.current;
  const depthRatio = bigPoll.p50 / smallPoll.p50;
  addRow(ctx, {
    group: 'Poll',
    what: `One poll, ${big.toLocaleString('en-US')} pending rows`,
    ours: { value: bigPoll.p50, unit: 'ms' },
    target: {
      text: `within 1.5× of ${small.toLocaleString('en-US')} pending`,
      measured: times(depthRatio),
      met: judge(ctx, depthRatio <= 1.5),
    },
    spec: '0.9 ms',
    note: `Median of ${iterations}; ${bigFigures.describe()}. Server time against the ${small.toLocaleString('en-US')} row: ${times(bigFigures.currentServer / smallFigures.currentServer)}. Filled in ${fillSeconds.toFixed(1)} s, then ${bigVacuum}.`,
  });
  await plan(ctx, `Poll, ${big} pending rows`, pollStatement(db, BIG));
  await countsRows(ctx, bigOutboxer, big, { coldOurs, coldGrouped });
  await blockedRows(ctx, smallPoll.p50, iterations);
  await pruneRows(ctx);
}
