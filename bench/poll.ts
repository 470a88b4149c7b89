/**
 * One poll at different depths and shapes of backlog (the exact statement the worker runs, built
 * by the dialect), counts() on a million rows, and prune. With BENCH_PLANS=1 also the plans of
 * the poll, the acknowledge and counts.
 */
import type pg from 'pg';
import { Outboxer, batchRelay, type DeliveryOutcome, type SqlQuery } from 'outboxer';
import { nodePostgres, postgresDialect } from 'outboxer/pg';
import { addRow, judge, type BenchContext } from './context.js';
import { formatMs, percent, times } from './report.js';
import {
  dropTables,
  explain,
  fill,
  median,
  rows,
  seconds,
  serverTime,
  timeStatement,
  vacuum,
} from './support.js';

/** The million-row table: also drained by the memory row. */
export const BIG = 'bench_big';
const SMALL = 'bench_poll';
const BLOCKED = 'bench_blocked';
const MANY = 'bench_blocked_many';
const PRUNE = 'bench_prune';
const GROUPS = 10_000;
const LEASE = { outbox: 'bench', partition: 0, owner: 'bench', epoch: 1 };

const table = (name: string) => ({ schema: undefined, name });

/**
 * The statement a worker of partition 0 runs, batch 100: by default at the start of a pass (cursor
 * at 0); `at` gives a cursor and the rewind count the worker saw on the lease row (none: no row).
 */
export function pollStatement(
  name: string,
  at: { afterId: number; rewindsSeen?: number } = { afterId: 0 },
): SqlQuery {
  return postgresDialect.poll(table(name), {
    lease: LEASE,
    ordering: 'group',
    limit: 100,
    ...at,
    dueBefore: null,
    now: Date.now(),
    parkDead: false, // the default onDead: 'continue', as the worker passes it
  });
}

/**
 * Where the engine's cursor stood once it had drained a table: at the last id drawn (the last
 * message it handed out), with the rewind count of the lease row it held.
 */
async function drainedCursor(
  ctx: BenchContext,
  name: string,
): Promise<{ afterId: number; rewindsSeen?: number }> {
  const { rows: last } = await ctx.pool.query(
    `SELECT pg_sequence_last_value(pg_get_serial_sequence($1, 'id'))::int AS id`,
    [`"${name}"`],
  );
  const { rows: lease } = await ctx.pool.query(
    `SELECT rewinds::int FROM "${name}_leases" WHERE outbox = 'bench' AND partition = 0`,
  );
  return { afterId: last[0].id, ...(lease[0] === undefined ? {} : { rewindsSeen: lease[0].rewinds }) };
}

/** Client p50 and server time of the poll, for a row's note. */
async function pollFigures(ctx: BenchContext, query: SqlQuery, iterations: number) {
  const current = await timeStatement(ctx.pool, query, iterations);
  const currentServer = await serverTime(ctx.pool, query);
  const describe = () =>
    `server execution ${formatMs(currentServer)} ms (EXPLAIN ANALYZE, median of 15); p95 at the client ${formatMs(current.p95)} ms`;
  return { current, currentServer, describe };
}

/**
 * A poll row of a blocked state, at the cursor the engine stood at when the new backlog arrived:
 * timed first with the statistics the table had before the block (nothing analyzed it since: this
 * server runs with autovacuum off), then after VACUUM (ANALYZE); the judged figure is the worse of
 * the two, against the unblocked poll. The poll from the beginning, which a worker runs once per
 * pollInterval and after a rewind, is timed beside it: before vacuum it steps over the index
 * entries that the held and delivered rows left.
 */
async function blockedPollRow(
  ctx: BenchContext,
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
  const cursor = await drainedCursor(ctx, row.table);
  await row.arrive();
  const atCursor = pollStatement(row.table, cursor);
  const fromStart = pollStatement(row.table);
  const stale = await pollFigures(ctx, atCursor, Math.ceil(row.iterations / 3));
  const staleRestart = await pollFigures(ctx, fromStart, Math.ceil(row.iterations / 3));
  await plan(ctx, `${row.plan}, statistics of before the block`, atCursor);
  await vacuum(ctx.pool, row.table);
  const analyzed = await pollFigures(ctx, atCursor, row.iterations);
  await plan(ctx, `${row.plan}, analyzed`, atCursor);
  const analyzedRestart = await pollFigures(ctx, fromStart, Math.ceil(row.iterations / 3));
  const worst = Math.max(analyzed.current.p50, stale.current.p50);
  const ratio = worst / row.unblocked;
  addRow(ctx, {
    group: 'Poll',
    what: row.what,
    ours: {
      value: worst,
      unit: 'ms',
      text: `${formatMs(analyzed.current.p50)} ms analyzed, ${formatMs(stale.current.p50)} ms stale statistics`,
    },
    target: {
      text: 'within 2× of an unblocked poll (the worse of the two)',
      measured: times(ratio),
      met: judge(ctx, ratio <= 2),
    },
    spec: row.spec,
    note: `${row.how} The poll from the engine's cursor (after id ${cursor.afterId.toLocaleString('en-US')}), with the statistics of before the block: ${stale.describe()}. After VACUUM (ANALYZE): median of ${row.iterations}; ${analyzed.describe()}. From the beginning (once per pollInterval, and after a rewind): ${formatMs(staleRestart.current.p50)} ms with the statistics of before the block (${times(staleRestart.current.p50 / row.unblocked)} the unblocked poll), ${formatMs(analyzedRestart.current.p50)} ms after VACUUM (${times(analyzedRestart.current.p50 / row.unblocked)}).`,
  });
}

function publishOnly(pool: pg.Pool, name: string, extra: Record<string, unknown> = {}) {
  return new Outboxer({
    database: nodePostgres(pool),
    relay: false,
    outboxes: { bench: { table: name, ...extra } },
  });
}

export const groupedCount = (name: string): SqlQuery => ({
  text: `SELECT outbox, status, count(*) FROM "${name}" GROUP BY outbox, status`,
  values: [],
});

async function timeMany(iterations: number, fn: () => Promise<unknown>): Promise<number> {
  const samples: number[] = [];
  await fn(); // warm-up
  for (let i = 0; i < iterations; i += 1) samples.push((await seconds(fn)).seconds * 1000);
  return median(samples);
}

async function plan(ctx: BenchContext, title: string, query: SqlQuery): Promise<void> {
  if (!ctx.settings.plans) return;
  const text = await explain(ctx.pool, query);
  ctx.report.plans.push({ title, plan: `${query.text}\n\n${text}` });
  ctx.log(`\n-- ${title}\n${text}\n`);
}

/**
 * Puts a table in the state the engine leaves behind a blocked group: the relay fails every
 * message of the `blocked:*` groups (retry in an hour), the engine holds what queues behind them
 * and delivers the `others` ready rows that come after. Returns how long that took.
 */
async function blockThroughEngine(
  ctx: BenchContext,
  name: string,
  others: number,
): Promise<{ seconds: number; held: number; heads: number }> {
  let delivered = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const outboxer = new Outboxer({
    database: nodePostgres(ctx.pool),
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
          delivered += outcomes.filter((o) => o.ok).length;
          if (delivered >= others) done();
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
  const { rows: states } = await ctx.pool.query(
    `SELECT count(*) FILTER (WHERE status = 2)::int AS held, count(*) FILTER (WHERE status = 1)::int AS heads, count(*) FILTER (WHERE status = 0)::int AS ready FROM "${name}"`,
  );
  if (states[0].ready !== 0) throw new Error(`engine left ${states[0].ready} ready rows in ${name}`);
  return { seconds: took, held: states[0].held, heads: states[0].heads };
}

export async function pollRows(ctx: BenchContext): Promise<void> {
  const { pool, settings } = ctx;
  const iterations = settings.quick ? 20 : 300;

  // --- 10,000 pending: the unblocked reference.
  const small = rows(settings, 10_000, 2_000);
  await dropTables(pool, SMALL);
  await publishOnly(pool, SMALL).migrate();
  await fill(pool, { table: SMALL, outbox: 'bench', count: small, groups: GROUPS, partitions: 1 });
  await vacuum(pool, SMALL);
  const smallFigures = await pollFigures(ctx, pollStatement(SMALL), iterations);
  const smallPoll = smallFigures.current;
  const plainHead: SqlQuery = {
    text: `SELECT id, partition, group_key, type, payload::text AS payload, headers::text AS headers, attempts, last_error, next_attempt_at, inserted_at, status FROM "${SMALL}" WHERE outbox = $1 AND partition = $2 AND status = 0 ORDER BY id LIMIT 100`,
    values: ['bench', 0],
  };
  const plainPoll = await timeStatement(pool, plainHead, iterations);
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
    note: `Median of ${iterations} runs of the worker's exact poll statement (batch 100, ordering 'group', cursor at 0), measured at the client (round trip, 100 rows parsed by pg); ${smallFigures.describe()}.`,
  });
  await plan(ctx, `Poll, ${small} pending rows`, pollStatement(SMALL));
  await dropTables(pool, SMALL);

  // --- 1,000,000 pending: poll, counts, and the acknowledge plan. Kept for the memory row.
  const big = rows(settings, 1_000_000, 20_000);
  await dropTables(pool, BIG);
  const bigOutboxer = publishOnly(pool, BIG);
  await bigOutboxer.migrate();
  ctx.log(`  filling ${big.toLocaleString('en-US')} rows…`);
  const { seconds: fillSeconds } = await seconds(() =>
    fill(pool, { table: BIG, outbox: 'bench', count: big, groups: GROUPS, partitions: 1 }),
  );
  // counts() right after a bulk insert, before any vacuum (no visibility map yet).
  const coldOurs = (await seconds(() => bigOutboxer.counts('bench'))).seconds * 1000;
  const coldGrouped = (await seconds(() => pool.query(groupedCount(BIG).text))).seconds * 1000;
  await vacuum(pool, BIG);
  const bigFigures = await pollFigures(ctx, pollStatement(BIG), iterations);
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
    note: `Median of ${iterations}; ${bigFigures.describe()}. Server time against the ${small.toLocaleString('en-US')} row: ${times(bigFigures.currentServer / smallFigures.currentServer)}. Filled in ${fillSeconds.toFixed(1)} s, then VACUUM (ANALYZE).`,
  });
  await plan(ctx, `Poll, ${big} pending rows`, pollStatement(BIG));

  // counts() against a full grouped count(*) of the same table: with the tallies as the relays
  // keep them (one a partition), then with a relay's tick of uncompacted ones.
  const countIterations = settings.quick ? 2 : 7;
  const oursCounts = await timeMany(countIterations, () => bigOutboxer.counts('bench'));
  const grouped = await timeMany(countIterations, () => pool.query(groupedCount(BIG).text));
  const exact = await bigOutboxer.counts('bench');
  if (exact.pending !== big || !exact.exact)
    throw new Error(`counts() disagrees with the rows: ${exact.pending} of ${big}`);
  ctx.figures.set('counts.ours', oursCounts);
  const tallyRows = (await pool.query(`SELECT count(*)::int AS n FROM "${BIG}_tallies"`)).rows[0].n as number;
  addRow(ctx, {
    group: 'Counts',
    what: `\`counts()\` on ${big.toLocaleString('en-US')} rows`,
    ours: { value: oursCounts, unit: 'ms' },
    limit: {
      label: 'SELECT outbox, status, count(*) … GROUP BY outbox, status',
      figure: { value: grouped, unit: 'ms' },
    },
    ofLimit: `${times(grouped / oursCounts)} faster`,
    target: {
      text: '≥ 5× faster than the grouped count(*)',
      measured: times(grouped / oursCounts),
      met: judge(ctx, grouped / oursCounts >= 5),
    },
    spec: '125 ms',
    note: `Exact: the sum of the outbox's tallies (${tallyRows} rows, as the fill's statements wrote them; the relays compact them to one a partition), which every statement that changes a figure writes with its change. Median of ${countIterations}. The grouped count(*) after VACUUM; before any vacuum (fresh bulk insert): counts() ${formatMs(coldOurs)} ms, grouped count(*) ${formatMs(coldGrouped)} ms.`,
  });
  // A tick's worth of publishes and acknowledges between two compactions (every leaseTimeout / 3,
  // 10 s by default): 20,000 tallies that sum to nothing.
  const UNCOMPACTED = settings.quick ? 200 : 20_000;
  await pool.query(
    `INSERT INTO "${BIG}_tallies" (outbox, partition, pending, dead, delivered) SELECT 'bench', 0, CASE WHEN g % 2 = 0 THEN 1 ELSE -1 END, 0, 0 FROM generate_series(1, $1::int) AS g`,
    [UNCOMPACTED],
  );
  await vacuum(pool, `${BIG}_tallies`);
  const uncompactedCounts = await timeMany(countIterations, () => bigOutboxer.counts('bench'));
  if ((await bigOutboxer.counts('bench')).pending !== big)
    throw new Error('counts() disagrees with the rows');
  addRow(ctx, {
    group: 'Counts',
    what: `\`counts()\` on ${big.toLocaleString('en-US')} rows, ${UNCOMPACTED.toLocaleString('en-US')} tallies not yet compacted`,
    ours: { value: uncompactedCounts, unit: 'ms' },
    limit: { label: 'the same grouped count(*)', figure: { value: grouped, unit: 'ms' } },
    ofLimit: `${times(grouped / uncompactedCounts)} faster`,
    target: {
      text: '≥ 5× faster than the grouped count(*)',
      measured: times(grouped / uncompactedCounts),
      met: judge(ctx, grouped / uncompactedCounts >= 5),
    },
    note: `${UNCOMPACTED.toLocaleString('en-US')} tally rows summing to zero, as ten seconds of publishing and acknowledging at 1,000 transactions a second each leave between two compactions. Median of ${countIterations}.`,
  });
  await plan(ctx, `counts() as in src/, ${big} rows`, postgresDialect.counts(table(BIG), 'bench', 1));
  await plan(ctx, `Grouped count(*), ${big} rows`, groupedCount(BIG));
  if (settings.plans) {
    // The acknowledge of a batch of 100 at a million rows: lease fence and DELETE … = ANY.
    await pool.query(
      `INSERT INTO "${BIG}_leases" (outbox, partition, owner, epoch, lease_until) VALUES ('bench', 0, 'bench', 1, now() + interval '1 hour') ON CONFLICT DO NOTHING`,
    );
    const { rows: ids } = await pool.query(`SELECT id FROM "${BIG}" WHERE status = 0 ORDER BY id LIMIT 100`);
    const statements = postgresDialect.settle(table(BIG), {
      lease: LEASE,
      now: Date.now(),
      delivered: ids.map((r: { id: string }) => Number(r.id)),
      failed: [],
      unblockedGroups: [],
      keep: false,
      ttl: 30_000,
      parkDead: false,
    });
    // The common case is one statement: the lease renewal and the fenced DELETE in one CTE.
    await plan(
      ctx,
      `Acknowledge (one statement: lease renewal and fenced DELETE of 100), ${big} rows`,
      statements[0]!,
    );
    await pool.query(`DELETE FROM "${BIG}_leases"`);
  }

  // --- A blocked group with 100,000 rows behind its head, reached through the engine.
  const behind = rows(settings, 100_000, 2_000);
  const others = rows(settings, 10_000, 1_000);
  await dropTables(pool, BLOCKED);
  await publishOnly(pool, BLOCKED).migrate();
  await fill(pool, {
    table: BLOCKED,
    outbox: 'bench',
    count: behind + 1,
    groups: 1,
    partitions: 1,
    fixedGroupKey: 'blocked:0',
  });
  await fill(pool, {
    table: BLOCKED,
    outbox: 'bench',
    count: others,
    groups: GROUPS,
    partitions: 1,
    from: behind + 1,
  });
  await vacuum(pool, BLOCKED);
  const blocked = await blockThroughEngine(ctx, BLOCKED, others);
  await blockedPollRow(ctx, {
    // A fresh backlog of other groups arrives: the poll returns a full batch, as in the 10k row.
    arrive: () =>
      fill(pool, {
        table: BLOCKED,
        outbox: 'bench',
        count: others,
        groups: GROUPS,
        partitions: 1,
        from: behind + others + 1,
      }),
    table: BLOCKED,
    what: `One poll, a blocked group with ${behind.toLocaleString('en-US')} rows behind its head`,
    unblocked: smallPoll.p50,
    iterations,
    spec: '15 ms',
    how: `State reached through the engine: its relay failed the head (retry in 1 h) and the engine moved the ${blocked.held.toLocaleString('en-US')} rows behind it to held, which took ${blocked.seconds.toFixed(1)} s once (${Math.ceil(behind / 100)} poll-and-hold rounds) before the ${others.toLocaleString('en-US')} later messages of other groups went out; then ${others.toLocaleString('en-US')} new ready rows.`,
    plan: `Poll, a blocked group with ${behind} rows behind its head`,
  });
  await dropTables(pool, BLOCKED);

  // --- 2,000 blocked groups with 10 rows behind each.
  const groups = rows(settings, 2_000, 200);
  await dropTables(pool, MANY);
  await publishOnly(pool, MANY).migrate();
  // Heads first (one per group), then 10 rows per group, then other groups' messages.
  for (let round = 0; round <= 10; round += 1) {
    await pool.query(
      `INSERT INTO "${MANY}" (outbox, partition, group_key, payload) SELECT 'bench', 0, 'blocked:' || g, ('{"n":"' || lpad(g::text, 10, '0') || '","pad":"' || repeat('x', 173) || '"}')::json FROM generate_series(0, $1::int - 1) AS g`,
      [groups],
    );
  }
  await fill(pool, {
    table: MANY,
    outbox: 'bench',
    count: others,
    groups: GROUPS,
    partitions: 1,
    from: 11 * groups,
  });
  await vacuum(pool, MANY);
  const many = await blockThroughEngine(ctx, MANY, others);
  await blockedPollRow(ctx, {
    arrive: () =>
      fill(pool, {
        table: MANY,
        outbox: 'bench',
        count: others,
        groups: GROUPS,
        partitions: 1,
        from: 11 * groups + others,
      }),
    table: MANY,
    what: `One poll, ${groups.toLocaleString('en-US')} blocked groups with 10 rows behind each`,
    unblocked: smallPoll.p50,
    iterations,
    spec: '4.5 ms',
    how: `Reached through the engine (${many.heads} retrying heads, ${many.held.toLocaleString('en-US')} held rows; ${many.seconds.toFixed(1)} s to get there), then ${others.toLocaleString('en-US')} new ready rows.`,
    plan: `Poll, ${groups} blocked groups with 10 rows behind each`,
  });
  await dropTables(pool, MANY);

  await pruneRow(ctx);
  await idlePruneRow(ctx);
}

/** A publish-only outbox keeping its delivered rows for an hour, on a fresh `PRUNE` table. */
async function pruningOutboxer(pool: pg.Pool): Promise<Outboxer> {
  await dropTables(pool, PRUNE);
  const outboxer = new Outboxer({
    database: nodePostgres(pool),
    relay: false,
    outboxes: { bench: { table: PRUNE, retention: { keep: 3600 } } },
  });
  await outboxer.migrate();
  return outboxer;
}

async function pruneRow(ctx: BenchContext): Promise<void> {
  const { pool, settings } = ctx;
  const count = rows(settings, 500_000, 10_000);
  const prepare = async () => {
    await pool.query(`TRUNCATE "${PRUNE}"`);
    await fill(pool, {
      table: PRUNE,
      outbox: 'bench',
      count,
      groups: GROUPS,
      partitions: 1,
      status: 4,
      deliveredAt: `now() - interval '2 hours'`,
    });
    await vacuum(pool, PRUNE);
    // Both arms start from a checkpoint: the WAL of the rows before must not land on one of them.
    await pool.query('CHECKPOINT');
  };
  const outboxer = await pruningOutboxer(pool);
  if (settings.plans) {
    await prepare();
    const [current] = postgresDialect.prune(table(PRUNE), 'bench', 3600, 10_000, Date.now());
    await plan(ctx, `Prune, one batch of 10,000 as in src/, ${count} delivered rows`, current!);
  }
  const trials = settings.quick ? 1 : 3;
  const ours: number[] = [];
  const raw: number[] = [];
  for (let trial = 0; trial < trials; trial += 1) {
    await prepare();
    const pruned = await seconds(() => outboxer.prune('bench'));
    if (pruned.value !== count) throw new Error(`prune removed ${pruned.value} of ${count}`);
    ours.push(count / pruned.seconds);
    await prepare();
    const plain = await seconds(() =>
      pool.query(
        `DELETE FROM "${PRUNE}" WHERE outbox = $1 AND status = 4 AND delivered_at < now() - interval '3600 seconds'`,
        ['bench'],
      ),
    );
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
      text: '≥ 550,000 rows/s',
      measured: `${Math.round(oursRate).toLocaleString('en-US')} rows/s`,
      met: judge(ctx, oursRate >= 550_000),
    },
    spec: '550,000 rows/s',
    note: `${count.toLocaleString('en-US')} delivered rows older than the window, pruned by Outboxer.prune() in its batches of 10,000, each deleted by physical position (\`ctid = ANY(ARRAY(SELECT ctid …))\`); median of ${trials}.`,
  });
  await dropTables(pool, PRUNE);
}

/**
 * The pruner's run on an outbox that keeps its history and has nothing old enough to remove, the
 * state it finds every `pruneInterval`: it must cost the same however much history is kept.
 */
async function idlePruneRow(ctx: BenchContext): Promise<void> {
  const { pool, settings } = ctx;
  const iterations = settings.quick ? 10 : 50;
  const outboxer = await pruningOutboxer(pool);
  const [statement] = postgresDialect.prune(table(PRUNE), 'bench', 3600, 10_000, Date.now());
  // At the client (a transaction of three round trips) and on the server, where the history kept
  // would show: the judged figure.
  const idleRun = async (kept: number): Promise<{ client: number; server: number }> => {
    await pool.query(`TRUNCATE "${PRUNE}"`);
    await fill(pool, {
      table: PRUNE,
      outbox: 'bench',
      count: kept,
      groups: GROUPS,
      partitions: 1,
      status: 4,
      deliveredAt: 'now()',
    });
    await vacuum(pool, PRUNE);
    const runs: number[] = [];
    for (let i = 0; i < iterations; i += 1) {
      const run = await seconds(() => outboxer.prune('bench'));
      if (run.value !== 0) throw new Error(`an idle prune removed ${run.value} rows`);
      runs.push(run.seconds * 1000);
    }
    return { client: median(runs), server: await serverTime(pool, statement!) };
  };
  const small = rows(settings, 10_000, 1_000);
  const large = rows(settings, 1_000_000, 20_000);
  const smallRun = await idleRun(small);
  const largeRun = await idleRun(large);
  if (settings.plans)
    await plan(ctx, `Prune with nothing older than the window, ${large} delivered rows kept`, statement!);
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
    note: `One Outboxer.prune() run, as the pruner makes every pruneInterval, on an outbox whose delivered rows are all inside the window; median of ${iterations} at the client (one transaction: three round trips). On the server (EXPLAIN ANALYZE, median of 15): ${formatMs(largeRun.server)} ms, against ${formatMs(smallRun.server)} ms with ${small.toLocaleString('en-US')} kept. It reads the range of \`_delivered_at\` older than the window, which is empty.`,
  });
  await dropTables(pool, PRUNE);
}
