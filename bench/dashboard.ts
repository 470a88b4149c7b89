/**
 * The dashboard's API at a shallow and a deep backlog: every call the page makes on a refresh
 * (the overview, a page of pending messages, a filtered page of dead ones) and the detail view,
 * through the fetch handler itself (no HTTP), against 10,000 and 1,000,000 pending rows behind
 * 1,000 dead messages that park their groups (`onDead: 'park'`). On Postgres here; on SQLite
 * (BENCH_DB=sqlite) in dashboard-sqlite.ts, which shares the calls and the rows.
 */
import { Outboxer } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { createDashboard, type DashboardHandler } from '../src/dashboard/index.js';
import type { BenchContext } from './context.js';
import type { BenchRow } from './report.js';
import { formatMs } from './report.js';
import { dropTables, fill, vacuum, type PostgresBench } from './postgres.js';
import { quantile, rows } from './support.js';

const TABLE = 'bench_dashboard';
export const GROUPS = 1_000;
export const PARTITIONS = 4;
export const DEAD = 1_000;

type Calls = Record<string, string>;

/** What one backlog measured: medians and 95th percentiles by call, and one refresh. */
export interface Measured {
  p50(name: string): number;
  p95(name: string): number;
  refresh: number;
}

/** Every call the page makes, `iterations` times each after 3 warm-ups, through the handler. */
export async function timeCalls(
  handler: DashboardHandler,
  pending: number,
  iterations: number,
): Promise<Measured> {
  const calls: Calls = {
    overview: '/api/overview',
    pending: '/api/messages?outbox=bench&status=pending&limit=50',
    dead: '/api/messages?outbox=bench&status=dead&group=order%3A7&limit=50',
    detail: `/api/message?outbox=bench&id=${DEAD + Math.floor(pending / 2)}`,
  };
  const timings: Record<string, number[]> = {};
  for (const [name, path] of Object.entries(calls)) {
    const samples: number[] = [];
    for (let i = -3; i < iterations; i += 1) {
      const started = performance.now();
      const response = await handler(new Request(`http://bench${path}`));
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`${path}: HTTP ${response.status}`);
      if (i >= 0) samples.push(performance.now() - started);
    }
    timings[name] = samples;
  }
  const p50 = (name: string) => quantile(timings[name]!, 0.5);
  const p95 = (name: string) => quantile(timings[name]!, 0.95);
  return { p50, p95, refresh: p50('overview') + p50('pending') };
}

/** The report's row of one backlog. */
export function dashboardRow(database: string, count: number, m: Measured, iterations: number): BenchRow {
  return {
    group: 'Dashboard',
    what: `Dashboard API, one refresh, ${count.toLocaleString('en-US')} pending${database === '' ? '' : ` (${database})`}`,
    ours: {
      value: m.refresh,
      unit: 'ms',
      text: `${formatMs(m.refresh)} ms`,
    },
    note: `What the page asks every 2 s: the overview (counts, blocked-group counts, partitions, nodes, the 200 oldest of 1,000 parked groups; p50 ${formatMs(m.p50('overview'))} ms, p95 ${formatMs(m.p95('overview'))} ms) and a page of 50 pending messages (p50 ${formatMs(m.p50('pending'))} ms); a page of one group's dead messages among ${DEAD.toLocaleString('en-US')} p50 ${formatMs(m.p50('dead'))} ms; the detail view p50 ${formatMs(m.p50('detail'))} ms. ${GROUPS.toLocaleString('en-US')} groups in ${PARTITIONS} partitions; medians of ${iterations} calls of the fetch handler, no HTTP.`,
  };
}

async function measure(ctx: BenchContext<PostgresBench>, pending: number, iterations: number) {
  const { pool } = ctx.db;
  await dropTables(pool, TABLE);
  const outboxer = new Outboxer({
    database: nodePostgres(pool),
    relay: false,
    logger: false,
    outboxes: { bench: { table: TABLE, partitions: PARTITIONS, onDead: 'park' } },
  });
  await outboxer.migrate();
  await fill(pool, {
    table: TABLE,
    outbox: 'bench',
    count: DEAD,
    groups: GROUPS,
    partitions: PARTITIONS,
    status: 3,
  });
  await fill(pool, {
    table: TABLE,
    outbox: 'bench',
    count: pending,
    groups: GROUPS,
    partitions: PARTITIONS,
    from: DEAD,
  });
  await vacuum(pool, TABLE);
  const handler = createDashboard(outboxer as Outboxer<never, boolean>);
  const measured = await timeCalls(handler, pending, iterations);
  await dropTables(pool, TABLE);
  return measured;
}

export async function dashboardRows(ctx: BenchContext<PostgresBench>): Promise<void> {
  const iterations = ctx.settings.quick ? 10 : 100;
  const small = rows(ctx.settings, 10_000, 2_000);
  const big = rows(ctx.settings, 1_000_000, 20_000);
  const shallow = await measure(ctx, small, iterations);
  const deep = await measure(ctx, big, iterations);
  for (const [count, m] of [
    [small, shallow],
    [big, deep],
  ] as const) {
    const row = dashboardRow('', count, m, iterations);
    ctx.report.rows.push(row);
    ctx.log(`  ${row.what}: ${formatMs(m.refresh)} ms`);
  }
}
