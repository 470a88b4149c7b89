/**
 * Prune rows (part of the `poll` group): `Outboxer.prune()` on delivered rows past the retention
 * window against one plain DELETE of the same rows, and the pruner's run with nothing to remove,
 * which must cost the same however much history is kept.
 */
import { Outboxer } from 'outboxer';
import { addRow, judge, plan, type BenchContext } from './context.js';
import { table, type BenchDatabase } from './database.js';
import { formatMs, percent, times } from './report.js';
import { median, rows, seconds } from './support.js';

const PRUNE = 'bench_prune';
const GROUPS = 10_000;
const WINDOW = 3600;

type Ctx<Tx> = BenchContext<BenchDatabase<Tx>>;

/** A publish-only outbox keeping its delivered rows for an hour, on a fresh `PRUNE` table. */
async function pruningOutboxer<Tx>(db: BenchDatabase<Tx>): Promise<Outboxer<Tx>> {
  await db.dropTables(PRUNE);
  const outboxer = new Outboxer({
    database: db.adapter(),
    relay: false,
    outboxes: { bench: { table: PRUNE, retention: { keep: WINDOW } } },
  });
  await outboxer.migrate();
  return outboxer;
}

/** The dialect's prune batch as the pruner runs it (batches of 10,000). */
const pruneBatch = <Tx>(db: BenchDatabase<Tx>) =>
  db.dialect.prune(table(PRUNE), 'bench', WINDOW, 10_000, Date.now());

export async function pruneRows<Tx>(ctx: Ctx<Tx>): Promise<void> {
  await pruneRow(ctx);
  await idlePruneRow(ctx);
}

async function pruneRow<Tx>(ctx: Ctx<Tx>): Promise<void> {
  const { db, settings } = ctx;
  const count = rows(settings, 500_000, 10_000);
  const prepare = async () => {
    await db.truncate([PRUNE]);
    await db.fill({
      table: PRUNE,
      outbox: 'bench',
      count,
      groups: GROUPS,
      partitions: 1,
      status: 4,
      deliveredSecondsAgo: 2 * WINDOW,
    });
    await db.vacuum(PRUNE);
    // Both arms start from a checkpoint: the writes of the rows before must not land on one of them.
    await db.checkpoint();
  };
  const outboxer = await pruningOutboxer(db);
  if (settings.plans) {
    await prepare();
    await plan(ctx, `Prune, one batch of 10,000 as in src/, ${count} delivered rows`, pruneBatch(db));
  }
  const trials = settings.quick ? 1 : 3;
  const ours: number[] = [];
  const raw: number[] = [];
  const plainPrune = db.plain.prune(PRUNE, WINDOW);
  for (let trial = 0; trial < trials; trial += 1) {
    await prepare();
    const pruned = await seconds(() => outboxer.prune('bench'));
    if (pruned.value !== count) throw new Error(`prune removed ${pruned.value} of ${count}`);
    ours.push(count / pruned.seconds);
    await prepare();
    const plain = await seconds(() => db.query(plainPrune.text, plainPrune.values));
    raw.push(count / plain.seconds);
  }
  const oursRate = median(ours);
  const rawRate = median(raw);
  addRow(ctx, {
    group: 'Prune',
    what: 'Prune delivered rows',
    ours: { value: oursRate, unit: 'rows/s' },
    limit: {
      label: 'one DELETE … WHERE status = 4 AND delivered_at < …',
      figure: { value: rawRate, unit: 'rows/s' },
    },
    ofLimit: percent(oursRate / rawRate),
    target: {
      text: '≥ 70% of the plain DELETE of the same rows',
      measured: percent(oursRate / rawRate),
      met: judge(ctx, oursRate / rawRate >= 0.7),
    },
    spec: '550,000 rows/s',
    note: `${count.toLocaleString('en-US')} delivered rows older than the window, pruned by Outboxer.prune() in its batches of 10,000 (${db.kind === 'postgres' ? 'each a call of `<table>_prune()`: delete by physical position, `ctid = ANY(ARRAY(SELECT ctid …))`, tally the row count, commit without waiting for the flush' : 'each a transaction: lock the batch’s ids into a session variable, tally, delete by those ids'}); median of ${trials}.`,
  });
  await db.dropTables(PRUNE);
}

/**
 * The pruner's run on an outbox that keeps its history and has nothing old enough to remove, the
 * state it finds every `pruneInterval`: it must cost the same however much history is kept.
 */
async function idlePruneRow<Tx>(ctx: Ctx<Tx>): Promise<void> {
  const { db, settings } = ctx;
  const iterations = settings.quick ? 10 : 50;
  const outboxer = await pruningOutboxer(db);
  const statements = pruneBatch(db);
  // At the client (a transaction of a few round trips) and on the server, where the history kept
  // would show: the judged figure.
  const idleRun = async (kept: number): Promise<{ client: number; server: number }> => {
    await db.truncate([PRUNE]);
    await db.fill({ table: PRUNE, outbox: 'bench', count: kept, groups: GROUPS, partitions: 1, status: 4 });
    await db.vacuum(PRUNE);
    const runs: number[] = [];
    for (let i = 0; i < iterations; i += 1) {
      const run = await seconds(() => outboxer.prune('bench'));
      if (run.value !== 0) throw new Error(`an idle prune removed ${run.value} rows`);
      runs.push(run.seconds * 1000);
    }
    return { client: median(runs), server: await db.serverTime(statements) };
  };
  const small = rows(settings, 10_000, 1_000);
  const large = rows(settings, 1_000_000, 20_000);
  const smallRun = await idleRun(small);
  const largeRun = await idleRun(large);
  if (settings.plans)
    await plan(ctx, `Prune with nothing older than the window, ${large} delivered rows kept`, statements);
  const ratio = largeRun.server / smallRun.server;
  addRow(ctx, {
    group: 'Prune',
    what: `Prune with nothing older than the window, ${large.toLocaleString('en-US')} delivered rows kept`,
    ours: { value: largeRun.client, unit: 'ms' },
    limit: {
      label: `the same with ${small.toLocaleString('en-US')} rows kept`,
      figure: { value: smallRun.client, unit: 'ms' },
    },
    ofLimit: times(largeRun.client / smallRun.client),
    target: {
      text: `the same at any history kept (server time within 1.5× of ${small.toLocaleString('en-US')} kept)`,
      measured: times(ratio),
      met: judge(ctx, ratio <= 1.5),
    },
    note: `One Outboxer.prune() run, as the pruner makes every pruneInterval, on an outbox whose delivered rows are all inside the window; median of ${iterations} at the client (one transaction of ${statements.length} statement${statements.length === 1 ? '' : 's'}). On the server (${db.serverTimeLabel}, median of 15): ${formatMs(largeRun.server)} ms, against ${formatMs(smallRun.server)} ms with ${small.toLocaleString('en-US')} kept. It reads the range of \`_delivered_at\` older than the window, which is empty.`,
  });
  await db.dropTables(PRUNE);
}
