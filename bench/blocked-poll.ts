/**
 * Poll rows of the states the engine leaves behind (part of the `poll` group): a blocked group with
 * 100,000 rows behind its head and 2,000 blocked groups with 10 rows behind each, each judged
 * against the unblocked poll, before and after vacuum, at the engine's cursor and from the
 * beginning; and, where the dialect keeps no cursor (MySQL), the poll from the head right after a
 * drain. With BENCH_PLANS=1 also their plans.
 */
import { Outboxer, batchRelay, type DeliveryOutcome } from 'outboxer';
import { addRow, judge, plan } from './context.js';
import type { BenchDatabase } from './database.js';
import { GROUPS, pollFigures, pollStatement, publishOnly, type Ctx } from './poll-statement.js';
import { formatMs, times } from './report.js';
import { rows, seconds } from './support.js';

const BLOCKED = 'bench_blocked';
const MANY = 'bench_blocked_many';
const DRAINED = 'bench_drained';

/**
 * Where the engine's cursor stood once it had drained a table: at the last id drawn (the last
 * message it handed out), with the rewind count of the lease row it held. At 0 where the dialect
 * keeps no cursor: every poll starts from the head of the partition.
 */
async function drainedCursor<Tx>(
  ctx: Ctx<Tx>,
  name: string,
): Promise<{ afterId: number; rewindsSeen?: number }> {
  const { db } = ctx;
  if (!db.dialect.capabilities.pollCursor) return { afterId: 0 };
  const afterId = await db.lastDrawnId(name);
  const [lease] = await db.query(
    `SELECT rewinds FROM ${db.quote(`${name}_leases`)} WHERE outbox = 'bench' AND partition = 0`,
  );
  return { afterId, ...(lease === undefined ? {} : { rewindsSeen: Number(lease.rewinds) }) };
}

/**
 * A poll row of a blocked state, at the cursor the engine stood at when the new backlog arrived:
 * timed first with the statistics the table had before the block (nothing analyzed it since: the
 * Postgres server runs with autovacuum off; on MySQL, InnoDB's purge may not have caught up), then
 * after `db.vacuum`; the judged figure is the worse of the two, against the unblocked poll. The
 * poll from the beginning, which a worker runs once per pollInterval and after a rewind, is timed
 * beside it: before vacuum it steps over the index entries that the held and delivered rows left.
 * Where the dialect keeps no cursor, the two are the same statement, timed once.
 */
async function blockedPollRow<Tx>(
  ctx: Ctx<Tx>,
  row: {
    table: string;
    what: string;
    unblocked: number;
    iterations: number;
    spec: string;
    how: string;
    /** Publishes the new backlog of other groups. */
    arrive: () => Promise<void>;
    /** Title of the plans (BENCH_PLANS=1) of the poll at the cursor, before and after vacuum. */
    plan: string;
  },
): Promise<void> {
  const { db } = ctx;
  const keepsCursor = db.dialect.capabilities.pollCursor;
  const cursor = await drainedCursor(ctx, row.table);
  await row.arrive();
  const atCursor = pollStatement(db, row.table, cursor);
  const fromStart = pollStatement(db, row.table);
  const stale = await pollFigures(ctx, atCursor, Math.ceil(row.iterations / 3));
  const staleRestart = keepsCursor ? await pollFigures(ctx, fromStart, Math.ceil(row.iterations / 3)) : stale;
  await plan(ctx, `${row.plan}, statistics of before the block`, atCursor);
  const vacuumed = await db.vacuum(row.table);
  const analyzed = await pollFigures(ctx, atCursor, row.iterations);
  await plan(ctx, `${row.plan}, analyzed`, atCursor);
  const analyzedRestart = keepsCursor
    ? await pollFigures(ctx, fromStart, Math.ceil(row.iterations / 3))
    : analyzed;
  const worst = Math.max(analyzed.current.p50, stale.current.p50);
  const ratio = worst / row.unblocked;
  const where = keepsCursor
    ? `The poll from the engine's cursor (after id ${cursor.afterId.toLocaleString('en-US')})`
    : `The poll from the head of the partition (${db.title}: the dialect keeps no cursor, every poll starts there)`;
  const restart = keepsCursor
    ? ` From the beginning (once per pollInterval, and after a rewind): ${formatMs(staleRestart.current.p50)} ms with the statistics of before the block (${times(staleRestart.current.p50 / row.unblocked)} the unblocked poll), ${formatMs(analyzedRestart.current.p50)} ms after ${vacuumed} (${times(analyzedRestart.current.p50 / row.unblocked)}).`
    : '';
  addRow(ctx, {
    group: 'Poll',
    what: row.what,
    ours: {
      value: worst,
      unit: 'ms',
      text: `${formatMs(analyzed.current.p50)} ms analyzed, ${formatMs(stale.current.p50)} ms stale statistics`,
    },
    target: {
      text: 'within 1.5× of an unblocked poll (the worse of the two)',
      measured: times(ratio),
      met: judge(ctx, ratio <= 1.5),
    },
    spec: row.spec,
    note: `${row.how} ${where}, with the statistics of before the block: ${stale.describe()}. After ${vacuumed}: median of ${row.iterations}; ${analyzed.describe()}.${restart}`,
  });
}

/** Counts a table's rows by status (held, retrying heads, ready). */
async function states<Tx>(db: BenchDatabase<Tx>, name: string) {
  const count = (status: number) => `SUM(CASE WHEN status = ${status} THEN 1 ELSE 0 END)`;
  const [row] = await db.query(
    `SELECT ${count(2)} AS held, ${count(1)} AS heads, ${count(0)} AS ready FROM ${db.quote(name)}`,
  );
  return { held: Number(row?.held ?? 0), heads: Number(row?.heads ?? 0), ready: Number(row?.ready ?? 0) };
}

/**
 * Runs a relaying instance on `name` until `delivered` messages went out: with `refuse`, its relay
 * fails every message of the `blocked:*` groups (retry in an hour), so the engine holds what
 * queues behind them and delivers the rest. Returns how long it took.
 */
async function runEngine<Tx>(ctx: Ctx<Tx>, name: string, delivered: number): Promise<number> {
  let sent = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const outboxer = new Outboxer({
    database: ctx.db.adapter(),
    outboxes: {
      bench: {
        table: name,
        backoff: { min: 3_600_000, max: 3_600_000 },
        relay: batchRelay(async (batch) => {
          const outcomes: DeliveryOutcome[] = batch.map((m) =>
            m.groupKey?.startsWith('blocked:')
              ? { ok: false, error: new Error('destination refuses') }
              : { ok: true },
          );
          sent += outcomes.filter((o) => o.ok).length;
          if (sent >= delivered) done();
          return outcomes;
        }),
      },
    },
  });
  const { seconds: took } = await seconds(async () => {
    await outboxer.start();
    await finished;
    await outboxer.stop();
  });
  return took;
}

/** Puts a table in the state the engine leaves behind blocked groups (see {@link runEngine}). */
async function blockThroughEngine<Tx>(ctx: Ctx<Tx>, name: string, others: number) {
  const took = await runEngine(ctx, name, others);
  const state = await states(ctx.db, name);
  if (state.ready !== 0) throw new Error(`engine left ${state.ready} ready rows in ${name}`);
  return { seconds: took, held: state.held, heads: state.heads };
}

/**
 * Where the dialect keeps no cursor (MySQL): one poll from the head of the partition right after
 * the engine drained 100,000 messages and 10,000 new ones arrived, before the server's purge has
 * removed the deleted rows' index entries, and again once it has; against the plain SELECT from a
 * cursor past the drained ids, which a dialect with a cursor would run. The cost of the design
 * that keeps a group's order under concurrent writers without a snapshot to check.
 */
export async function drainedPollRow<Tx>(ctx: Ctx<Tx>, unblocked: number, iterations: number): Promise<void> {
  const { db, settings } = ctx;
  const drained = rows(settings, 100_000, 2_000);
  const fresh = rows(settings, 10_000, 1_000);
  await db.dropTables(DRAINED);
  await publishOnly(db, DRAINED).migrate();
  await db.fill({ table: DRAINED, outbox: 'bench', count: drained, groups: GROUPS, partitions: 1 });
  await db.vacuum(DRAINED);
  const took = await runEngine(ctx, DRAINED, drained);
  const lastId = await db.lastDrawnId(DRAINED);
  await db.fill({
    table: DRAINED,
    outbox: 'bench',
    count: fresh,
    groups: GROUPS,
    partitions: 1,
    from: drained,
  });
  const poll = pollStatement(db, DRAINED);
  const fromCursor = db.plain.head(DRAINED, lastId);
  const before = await pollFigures(ctx, poll, Math.ceil(iterations / 3));
  const plainBefore = await db.timeStatement(fromCursor, Math.ceil(iterations / 3));
  await plan(ctx, `Poll from the head right after a drain of ${drained}`, poll);
  const vacuumed = await db.vacuum(DRAINED);
  const after = await pollFigures(ctx, poll, iterations);
  const plainAfter = await db.timeStatement(fromCursor, iterations);
  const worst = Math.max(before.current.p50, after.current.p50);
  addRow(ctx, {
    group: 'Poll',
    what: `One poll from the head, right after ${drained.toLocaleString('en-US')} rows were relayed (no cursor)`,
    ours: {
      value: worst,
      unit: 'ms',
      text: `${formatMs(before.current.p50)} ms before purge, ${formatMs(after.current.p50)} ms after`,
    },
    limit: {
      label: 'the plain SELECT … ORDER BY id LIMIT 100 from a cursor past the drained ids',
      figure: { value: plainBefore.p50, unit: 'ms' },
    },
    ofLimit: times(before.current.p50 / plainBefore.p50),
    target: {
      text: 'within 2× of an unblocked poll (the worse of the two)',
      measured: times(worst / unblocked),
      met: judge(ctx, worst / unblocked <= 2),
    },
    note: `The engine drained ${drained.toLocaleString('en-US')} messages in ${took.toFixed(1)} s (retention 'delete'), then ${fresh.toLocaleString('en-US')} new ones arrived. Timed at once: ${before.describe()}; the plain SELECT from a cursor ${formatMs(plainBefore.p50)} ms. After ${vacuumed}: ${after.describe()}; the plain SELECT ${formatMs(plainAfter.p50)} ms (the poll at ${times(after.current.p50 / plainAfter.p50)} of it: its retries' probe and a blocked-group probe per row).`,
  });
  await db.dropTables(DRAINED);
}

/** The two blocked states of the spec's table, each reached through the engine. */
export async function blockedRows<Tx>(ctx: Ctx<Tx>, unblocked: number, iterations: number): Promise<void> {
  const { db, settings } = ctx;
  // --- A blocked group with 100,000 rows behind its head.
  const behind = rows(settings, 100_000, 2_000);
  const others = rows(settings, 10_000, 1_000);
  const backlog = (name: string, from: number) => () =>
    db.fill({ table: name, outbox: 'bench', count: others, groups: GROUPS, partitions: 1, from });
  await db.dropTables(BLOCKED);
  await publishOnly(db, BLOCKED).migrate();
  await db.fill({
    table: BLOCKED,
    outbox: 'bench',
    count: behind + 1,
    groups: 1,
    partitions: 1,
    fixedGroupKey: 'blocked:0',
  });
  await backlog(BLOCKED, behind + 1)();
  await db.vacuum(BLOCKED);
  const blocked = await blockThroughEngine(ctx, BLOCKED, others);
  await blockedPollRow(ctx, {
    // A fresh backlog of other groups arrives: the poll returns a full batch, as in the 10k row.
    arrive: backlog(BLOCKED, behind + others + 1),
    table: BLOCKED,
    what: `One poll, a blocked group with ${behind.toLocaleString('en-US')} rows behind its head`,
    unblocked,
    iterations,
    spec: '15 ms',
    how: `State reached through the engine: its relay failed the head (retry in 1 h) and the engine moved the ${blocked.held.toLocaleString('en-US')} rows behind it to held, which took ${blocked.seconds.toFixed(1)} s once (${Math.ceil(behind / 100)} poll-and-hold rounds) before the ${others.toLocaleString('en-US')} later messages of other groups went out; then ${others.toLocaleString('en-US')} new ready rows.`,
    plan: `Poll, a blocked group with ${behind} rows behind its head`,
  });
  await db.dropTables(BLOCKED);

  // --- 2,000 blocked groups with 10 rows behind each: heads first (one per group), then 10 rows
  // per group, then other groups' messages.
  const groups = rows(settings, 2_000, 200);
  await db.dropTables(MANY);
  await publishOnly(db, MANY).migrate();
  for (let round = 0; round <= 10; round += 1) {
    await db.fill({
      table: MANY,
      outbox: 'bench',
      count: groups,
      groups,
      keyPrefix: 'blocked:',
      partitions: 1,
      from: round * groups,
    });
  }
  await backlog(MANY, 11 * groups)();
  await db.vacuum(MANY);
  const many = await blockThroughEngine(ctx, MANY, others);
  await blockedPollRow(ctx, {
    arrive: backlog(MANY, 11 * groups + others),
    table: MANY,
    what: `One poll, ${groups.toLocaleString('en-US')} blocked groups with 10 rows behind each`,
    unblocked,
    iterations,
    spec: '4.5 ms',
    how: `Reached through the engine (${many.heads} retrying heads, ${many.held.toLocaleString('en-US')} held rows; ${many.seconds.toFixed(1)} s to get there), then ${others.toLocaleString('en-US')} new ready rows.`,
    plan: `Poll, ${groups} blocked groups with 10 rows behind each`,
  });
  await db.dropTables(MANY);
}
