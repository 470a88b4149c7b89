import type pg from 'pg';
import type { BenchRow, PeerRow, Report } from './report.js';
import type { BenchSettings } from './support.js';

/** What every group of rows receives. */
export interface BenchContext {
  readonly settings: BenchSettings;
  /** A pool on the benchmark database (room for 10 writers, 4 partitions and a listener). */
  readonly pool: pg.Pool;
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

/** A target judged only on full runs: a smoke run's figures mean nothing. */
export function judge(ctx: BenchContext, ok: boolean): boolean | undefined {
  return ctx.settings.quick ? undefined : ok;
}
