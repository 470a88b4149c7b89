/**
 * Relay rows: outboxer's workers draining a backlog through a relay that only counts, against a
 * plain claim-and-delete loop that keeps its own cursor (each database's fastest plain form, in
 * `db.plain.claim`: on Postgres `DELETE … WHERE id = ANY(ARRAY(SELECT … ORDER BY id LIMIT n))
 * RETURNING …`, since `id IN (SELECT …)` can turn into a hash join over the whole table) on an
 * identical table filled the same way. Trials alternate; the judged ratio is the median of the
 * per-trial ratios, which cancels most of the drift of a shared machine. Where the dialect keeps
 * no poll cursor (MySQL: see src/dialects/mysql/poll.ts), a third arm runs the plain loop from the
 * head of the partition every time, as outboxer's poll does: what that design costs plain SQL.
 */
import { Outboxer, batchRelay, type Retention } from 'outboxer';
import { addRow, judge, type BenchContext } from './context.js';
import type { BenchDatabase } from './database.js';
import { percent } from './report.js';
import { cpuMeter, describeCpu, median, rows, type CpuUse } from './support.js';

const OURS = 'bench_relay';
const RAW = 'bench_relay_raw';
const GROUPS = 10_000;

export interface RelayConfig {
  readonly partitions: number;
  readonly batchSize: number;
  readonly keep: boolean;
}

export interface RelayRun {
  readonly rate: number;
  readonly cpu: CpuUse;
}

export async function relayOurs<Tx>(
  ctx: BenchContext<BenchDatabase<Tx>>,
  config: RelayConfig,
  count: number,
): Promise<RelayRun> {
  const { db } = ctx;
  await db.dropTables(OURS);
  let delivered = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const retention: Retention = config.keep ? { keep: 3600 } : 'delete';
  const outboxer = new Outboxer({
    database: db.adapter(),
    outboxes: {
      bench: {
        table: OURS,
        partitions: config.partitions,
        batchSize: config.batchSize,
        retention,
        relay: batchRelay(async (batch) => {
          delivered += batch.length;
          if (delivered >= count) done();
        }),
      },
    },
  });
  await outboxer.migrate();
  await db.fill({ table: OURS, outbox: 'bench', count, groups: GROUPS, partitions: config.partitions });
  await db.vacuum(OURS);
  const cpu = cpuMeter();
  const started = performance.now();
  await outboxer.start();
  await finished;
  await outboxer.stop(); // the last batch is settled before stop() returns
  const elapsed = (performance.now() - started) / 1000;
  const use = cpu.stop();
  const [left] = await db.query(`SELECT count(*) AS n FROM ${db.quote(OURS)} WHERE status < 3`);
  if (Number(left?.n) !== 0) throw new Error(`relay left ${String(left?.n)} messages pending`);
  await db.dropTables(OURS);
  return { rate: count / elapsed, cpu: use };
}

/** The plain loop, one per partition; `cursor: false` starts every batch at the partition's head. */
export async function relayRaw<Tx>(
  ctx: BenchContext<BenchDatabase<Tx>>,
  config: RelayConfig,
  count: number,
  cursor = true,
): Promise<RelayRun> {
  const { db } = ctx;
  await db.dropTables(RAW);
  await new Outboxer({ database: db.adapter(), relay: false, outboxes: { bench: { table: RAW } } }).migrate();
  await db.fill({ table: RAW, outbox: 'bench', count, groups: GROUPS, partitions: config.partitions });
  await db.vacuum(RAW);
  let delivered = 0;
  const cpu = cpuMeter();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: config.partitions }, async (_, partition) => {
      const connection = await db.connect();
      try {
        let last = 0;
        for (;;) {
          const batch = await db.plain.claim(connection, {
            table: RAW,
            partition,
            afterId: cursor ? last : 0,
            limit: config.batchSize,
            keep: config.keep,
          });
          if (batch.length === 0) break;
          delivered += batch.length;
          for (const row of batch) last = Math.max(last, Number(row.id));
        }
      } finally {
        connection.release();
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const use = cpu.stop();
  if (delivered !== count) throw new Error(`raw loop delivered ${delivered} of ${count}`);
  await db.dropTables(RAW);
  return { rate: count / elapsed, cpu: use };
}

export async function relayRows<Tx>(ctx: BenchContext<BenchDatabase<Tx>>): Promise<void> {
  const { settings, db } = ctx;
  // The cost of polling from the head where the dialect keeps no cursor, measured on plain SQL
  // (on the single-partition rows that delete: the loop's own pace is what it changes).
  const noCursor = !db.dialect.capabilities.pollCursor;
  const count = rows(settings, 100_000, 3_000);
  // Five: the plain loop's pace alone swings by a third between runs of this machine.
  const trials = settings.quick ? 1 : 5;
  const configs = [
    {
      what: 'Relay, 1 partition, `batchSize: 100`',
      key: 'p1b100',
      config: { partitions: 1, batchSize: 100, keep: false },
      spec: '32,000 msg/s',
    },
    {
      what: 'Relay, 4 partitions (`batchSize: 100`)',
      key: 'p4b100',
      config: { partitions: 4, batchSize: 100, keep: false },
      spec: '100,000 msg/s',
    },
    {
      what: 'Relay, 1 partition, `batchSize: 1000`',
      key: 'p1b1000',
      config: { partitions: 1, batchSize: 1000, keep: false },
      spec: '160,000 msg/s',
    },
    {
      what: 'Relay, `retention: { keep }` (1 partition, `batchSize: 100`)',
      key: 'keep',
      config: { partitions: 1, batchSize: 100, keep: true },
      spec: '28,000 msg/s',
    },
  ];
  for (const { what, key, config, spec } of configs) {
    const fromHead = noCursor && config.partitions === 1 && !config.keep;
    const ours: RelayRun[] = [];
    const raw: RelayRun[] = [];
    const head: RelayRun[] = [];
    const arms = [
      async () => raw.push(await relayRaw(ctx, config, count)),
      async () => ours.push(await relayOurs(ctx, config, count)),
      ...(fromHead ? [async () => head.push(await relayRaw(ctx, config, count, false))] : []),
    ];
    // Each trial runs every arm, the first one rotating.
    for (let trial = 0; trial < trials; trial += 1)
      for (let i = 0; i < arms.length; i += 1) await arms[(i + trial) % arms.length]!();
    const oursRate = median(ours.map((r) => r.rate));
    const rawRate = median(raw.map((r) => r.rate));
    const ratios = ours.map((r, i) => r.rate / raw[i]!.rate);
    const ratio = median(ratios);
    ctx.figures.set(`relay.${key}`, oursRate);
    ctx.figures.set(`relay.${key}.raw`, rawRate);
    const cpuNote = `CPU during the last trial: outboxer ${describeCpu(ours.at(-1)!.cpu)}; plain loop ${describeCpu(raw.at(-1)!.cpu)}`;
    const headNote = fromHead
      ? ` The same plain loop starting every batch at the head of the partition (\`id > 0\`, no cursor, as outboxer polls on ${db.title}): ${Math.round(median(head.map((r) => r.rate))).toLocaleString('en-US')} msg/s, ${percent(median(head.map((r, i) => r.rate / raw[i]!.rate)))} of the loop with a cursor (per-trial ${head.map((r, i) => percent(r.rate / raw[i]!.rate)).join(', ')}); outboxer is ${percent(median(ours.map((r, i) => r.rate / head[i]!.rate)))} of it.`
      : '';
    let target;
    if (key === 'p4b100') {
      const one = ctx.figures.get('relay.p1b100')!;
      const oneRaw = ctx.figures.get('relay.p1b100.raw')!;
      const gain = oursRate / one;
      target = {
        text: 'faster than 1 partition where cores allow',
        measured: `${gain.toFixed(2)}× of 1 partition (plain loops: ${(rawRate / oneRaw).toFixed(2)}×)`,
        met: judge(ctx, gain > 1),
      };
    } else if (key === 'keep') {
      target = undefined;
    } else {
      target = {
        text: '≥ 70% of the limit',
        measured: percent(ratio),
        met: judge(ctx, ratio >= 0.7),
      };
    }
    addRow(ctx, {
      group: 'Relay',
      what,
      ours: { value: oursRate, unit: 'msg/s' },
      limit: {
        label: `${db.plain.claimLabel(config.keep)}, LIMIT ${config.batchSize}${config.partitions > 1 ? `, ${config.partitions} loops` : ''}`,
        figure: { value: rawRate, unit: 'msg/s' },
      },
      ofLimit: percent(ratio),
      ...(target ? { target } : {}),
      spec,
      note: `${count.toLocaleString('en-US')} rows drained per trial, ${trials} alternating trials, medians (per-trial ratios ${ratios.map(percent).join(', ')}); ${cpuNote}.${headNote}`,
    });
  }
}
