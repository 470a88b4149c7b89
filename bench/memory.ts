/**
 * Memory: a relay process (bench/memory-child.ts, a child process) drains a backlog of a million
 * rows; its peak resident memory comes from the kernel (VmHWM), sampled from outside as well.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Outboxer } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { addRow, judge, type BenchContext } from './context.js';
import { BIG } from './poll.js';
import { dropTables, fill, vacuum, type PostgresBench } from './postgres.js';
import { rows } from './support.js';

interface ChildMessage {
  type: 'ready' | 'progress' | 'done';
  delivered?: number;
  seconds?: number;
  rssKb: number;
  hwmKb: number;
  maxRssKb?: number;
}

const root = fileURLToPath(new URL('..', import.meta.url));
const mb = (kb: number): number => kb / 1024;

function sampleRss(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

export async function memoryRows(ctx: BenchContext<PostgresBench>): Promise<void> {
  const { settings } = ctx;
  const { pool } = ctx.db;
  const count = rows(settings, 1_000_000, 20_000);
  // The poll rows leave the million-row table behind; fill it when they did not run.
  const exists = (await pool.query(`SELECT to_regclass($1) AS t`, [BIG])).rows[0].t !== null;
  const ready = exists
    ? Number((await pool.query(`SELECT count(*) AS n FROM "${BIG}" WHERE status = 0`)).rows[0].n)
    : 0;
  if (ready !== count) {
    await dropTables(pool, BIG);
    await new Outboxer({
      database: nodePostgres(pool),
      relay: false,
      outboxes: { bench: { table: BIG } },
    }).migrate();
    ctx.log(`  filling ${count.toLocaleString('en-US')} rows…`);
    await fill(pool, { table: BIG, outbox: 'bench', count, groups: 10_000, partitions: 1 });
    await vacuum(pool, BIG);
  }
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(new URL('./memory-child.ts', import.meta.url))],
    {
      cwd: root,
      env: {
        ...process.env,
        BENCH_CHILD_URL: settings.url,
        BENCH_CHILD_TABLE: BIG,
        BENCH_CHILD_COUNT: String(count),
        BENCH_CHILD_BATCH: '100',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let sampledPeakKb = 0;
  const sampler = setInterval(() => (sampledPeakKb = Math.max(sampledPeakKb, sampleRss(child.pid!))), 100);
  const messages: ChildMessage[] = [];
  const lines = createInterface({ input: child.stdout });
  lines.on('line', (line) => {
    try {
      messages.push(JSON.parse(line) as ChildMessage);
    } catch {
      ctx.log(`  child: ${line}`);
    }
  });
  const exitCode = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  clearInterval(sampler);
  const ready0 = messages.find((m) => m.type === 'ready');
  const done = messages.find((m) => m.type === 'done');
  if (exitCode !== 0 || done === undefined || ready0 === undefined)
    throw new Error(`relay child exited with ${exitCode} before reporting`);
  const left = Number((await pool.query(`SELECT count(*) AS n FROM "${BIG}" WHERE status < 3`)).rows[0].n);
  if (left !== 0) throw new Error(`the relay child left ${left} rows pending`);
  await dropTables(pool, BIG);

  const peakMb = mb(Math.max(done.hwmKb, sampledPeakKb));
  const progress = messages.filter((m) => m.type === 'progress');
  const paces: number[] = [];
  let previous = { delivered: 0, seconds: 0 };
  for (const p of progress) {
    paces.push((p.delivered! - previous.delivered) / (p.seconds! - previous.seconds));
    previous = { delivered: p.delivered!, seconds: p.seconds! };
  }
  const pace = (v: number | undefined) => (v === undefined ? '?' : Math.round(v).toLocaleString('en-US'));
  ctx.figures.set('memory.rate', count / done.seconds!);
  addRow(ctx, {
    group: 'Memory',
    what: `Relay process draining ${count.toLocaleString('en-US')} rows: peak RSS`,
    ours: { value: peakMb, unit: 'MB' },
    target: { text: '< 200 MB', measured: `${peakMb.toFixed(0)} MB`, met: judge(ctx, peakMb < 200) },
    note: `A child process (\`node --import tsx\`, batchSize 100, a relay that only counts): ${mb(ready0.rssKb).toFixed(0)} MB resident after loading, before connecting; peak ${peakMb.toFixed(0)} MB (kernel VmHWM ${mb(done.hwmKb).toFixed(0)} MB, sampled ${mb(sampledPeakKb).toFixed(0)} MB). Drained in ${done.seconds!.toFixed(1)} s (${pace(count / done.seconds!)} msg/s); pace per tenth of the backlog, first to last: ${paces.map(pace).join(', ')} msg/s.`,
  });
}
