import type { SqlQuery } from 'outboxer';
import type { BenchDatabase } from './database.js';
import type { BenchRow, PeerRow, Report } from './report.js';
import type { BenchSettings } from './support.js';

/**
 * What every group of rows receives: `Db` is the database the run measures (a Postgres-only group
 * asks for `BenchContext<PostgresBench>`, whose pool it uses).
 */
export interface BenchContext<Db extends BenchDatabase<unknown> = BenchDatabase<unknown>> {
  readonly settings: BenchSettings;
  /** The benchmark database: its pool, fixtures and plain SQL. */
  readonly db: Db;
  readonly report: Report;
  /** Figures later rows compare against (e.g. `publish.10` for the cost of notify). */
  readonly figures: Map<string, number>;
  log(message: string): void;
}

export function addRow(ctx: BenchContext, row: BenchRow): void {
  ctx.report.rows.push(row);
  ctx.log(`  ${row.what}: ${row.skipped ? `skipped (${row.skipped})` : summary(row)}`);
}

export function addPeerRow(ctx: BenchContext, row: PeerRow): void {
  ctx.report.peers.push(row);
}

function summary(row: BenchRow): string {
  const ours =
    row.ours === undefined ? '' : `${row.ours.text ?? `${row.ours.value.toFixed(2)} ${row.ours.unit}`}`;
  const limit =
    row.limit === undefined ? '' : `, limit ${row.limit.figure.text ?? row.limit.figure.value.toFixed(2)}`;
  const target =
    row.target === undefined
      ? ''
      : `, target ${row.target.text}: ${row.target.measured} ${row.target.met === false ? 'MISSED' : row.target.met ? 'met' : ''}`;
  return `${ours}${limit}${row.ofLimit ? ` (${row.ofLimit})` : ''}${target}`;
}

/** Records (BENCH_PLANS=1) the plans of statements run in one transaction, rolled back. */
export async function plan(
  ctx: BenchContext,
  title: string,
  queries: SqlQuery | readonly SqlQuery[],
): Promise<void> {
  if (!ctx.settings.plans) return;
  const list = Array.isArray(queries) ? (queries as readonly SqlQuery[]) : [queries as SqlQuery];
  const text = await ctx.db.explain(list);
  ctx.report.plans.push({ title, plan: `${list.map((q) => q.text).join(';\n')}\n\n${text}` });
  ctx.log(`\n-- ${title}\n${text}\n`);
}

/** A target judged only on full runs: a smoke run's figures mean nothing. */
export function judge(ctx: BenchContext, ok: boolean): boolean | undefined {
  return ctx.settings.quick ? undefined : ok;
}
