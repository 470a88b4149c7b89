/**
 * Relay rows: outboxer's workers draining a backlog through a relay that only counts, against a
 * plain claim-and-delete loop (`DELETE … WHERE id = ANY(ARRAY(SELECT … ORDER BY id LIMIT n))
 * RETURNING …`, the fastest plain form: `id IN (SELECT …)` can turn into a hash join over the
 * whole table) on an identical table filled the same way. Trials alternate; the judged ratio is
 * the median of the per-trial ratios, which cancels most of the drift of a shared machine.
 */
import { Outboxer, batchRelay, type Retention } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { addRow, judge, type BenchContext } from './context.js';
import { percent } from './report.js';
import { cpuMeter, describeCpu, dropTables, fill, median, rows, vacuum, type CpuUse } from './support.js';

const OURS = 'bench_relay';
const RAW = 'bench_relay_raw';
const GROUPS = 10_000;
/** The columns outboxer's poll reads, so both sides move the same bytes. */
const COLUMNS = `id, partition, group_key, type, payload::text AS payload, headers::text AS headers, attempts, last_error, next_attempt_at, inserted_at, status`;

export interface RelayConfig {
  readonly partitions: number;
  readonly batchSize: number;
  readonly keep: boolean;
}

export interface RelayRun {
  readonly rate: number;
  readonly cpu: CpuUse;
}

export async function relayOurs(ctx: BenchContext, config: RelayConfig, count: number): Promise<RelayRun> {
  const { pool } = ctx;
  await dropTables(pool, OURS);
  let delivered = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const retention: Retention = config.keep ? { keep: 3600 } : 'delete';
  const outboxer = new Outboxer({
    database: nodePostgres(pool),
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
  await fill(pool, { table: OURS, outbox: 'bench', count, groups: GROUPS, partitions: config.partitions });
  await vacuum(pool, OURS);
  const cpu = cpuMeter();
  const started = performance.now();
  await outboxer.start();
  await finished;
  await outboxer.stop(); // the last batch is settled before stop() returns
  const elapsed = (performance.now() - started) / 1000;
  const use = cpu.stop();
  const { rows: left } = await pool.query(`SELECT count(*)::int AS n FROM "${OURS}" WHERE status < 3`);
  if (left[0].n !== 0) throw new Error(`relay left ${left[0].n} messages pending`);
  await dropTables(pool, OURS);
  return { rate: count / elapsed, cpu: use };
}

export async function relayRaw(ctx: BenchContext, config: RelayConfig, count: number): Promise<RelayRun> {
  const { pool } = ctx;
  await dropTables(pool, RAW);
  await new Outboxer({
    database: nodePostgres(pool),
    relay: false,
    outboxes: { bench: { table: RAW } },
  }).migrate();
  await fill(pool, { table: RAW, outbox: 'bench', count, groups: GROUPS, partitions: config.partitions });
  await vacuum(pool, RAW);
  const claim = `SELECT id FROM "${RAW}" WHERE outbox = $1 AND partition = $2 AND status = 0 AND id > $3 ORDER BY id LIMIT $4`;
  const text = config.keep
    ? `UPDATE "${RAW}" SET status = 4, delivered_at = now(), next_attempt_at = NULL WHERE id = ANY(ARRAY(${claim})) RETURNING ${COLUMNS}`
    : `DELETE FROM "${RAW}" WHERE id = ANY(ARRAY(${claim})) RETURNING ${COLUMNS}`;
  let delivered = 0;
  const cpu = cpuMeter();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: config.partitions }, async (_, partition) => {
      const client = await pool.connect();
      try {
        let last = 0;
        for (;;) {
          const { rows: batch } = await client.query(text, ['bench', partition, last, config.batchSize]);
          if (batch.length === 0) break;
          delivered += batch.length;
          for (const row of batch) last = Math.max(last, Number(row.id));
        }
      } finally {
        client.release();
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const use = cpu.stop();
  if (delivered !== count) throw new Error(`raw loop delivered ${delivered} of ${count}`);
  await dropTables(pool, RAW);
  return { rate: count / elapsed, cpu: use };
}

export async function relayRows(ctx: BenchContext): Promise<void> {
  const { settings } = ctx;
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
    const ours: RelayRun[] = [];
    const raw: RelayRun[] = [];
    for (let trial = 0; trial < trials; trial += 1) {
      if (trial % 2 === 0) {
        raw.push(await relayRaw(ctx, config, count));
        ours.push(await relayOurs(ctx, config, count));
      } else {
        ours.push(await relayOurs(ctx, config, count));
        raw.push(await relayRaw(ctx, config, count));
      }
    }
    const oursRate = median(ours.map((r) => r.rate));
    const rawRate = median(raw.map((r) => r.rate));
    const ratios = ours.map((r, i) => r.rate / raw[i]!.rate);
    const ratio = median(ratios);
    ctx.figures.set(`relay.${key}`, oursRate);
    ctx.figures.set(`relay.${key}.raw`, rawRate);
    const cpuNote = `CPU during the last trial: outboxer ${describeCpu(ours.at(-1)!.cpu)}; plain loop ${describeCpu(raw.at(-1)!.cpu)}`;
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
        label: `${config.keep ? 'UPDATE … SET status = 4' : 'DELETE'} … RETURNING loop, LIMIT ${config.batchSize}${config.partitions > 1 ? `, ${config.partitions} loops` : ''}`,
        figure: { value: rawRate, unit: 'msg/s' },
      },
      ofLimit: percent(ratio),
      ...(target ? { target } : {}),
      spec,
      note: `${count.toLocaleString('en-US')} rows drained per trial, ${trials} alternating trials, medians (per-trial ratios ${ratios.map(percent).join(', ')}); ${cpuNote}.`,
    });
  }
}
