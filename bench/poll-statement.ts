/**
 * What the poll rows (bench/poll.ts, bench/blocked-poll.ts, bench/counts.ts) share: the exact poll
 * statement a worker runs and how a row times it, a publish-only outbox on a bench table, and the
 * tables' shape. Measures nothing itself.
 */
import { Outboxer, type SqlQuery } from 'outboxer';
import type { BenchContext } from './context.js';
import { table, type BenchDatabase } from './database.js';
import { formatMs } from './report.js';

/** The million-row table: also drained by the memory row. */
export const BIG = 'bench_big';
/** The groups the fills spread their rows over. */
export const GROUPS = 10_000;
export const LEASE = { outbox: 'bench', partition: 0, owner: 'bench', epoch: 1 };

export type Ctx<Tx> = BenchContext<BenchDatabase<Tx>>;

/**
 * The statement a worker of partition 0 runs, batch 100: by default at the start of a pass (cursor
 * at 0); `at` gives a cursor and the rewind count the worker saw on the lease row (none: no row).
 */
export function pollStatement<Tx>(
  db: BenchDatabase<Tx>,
  name: string,
  at: { afterId: number; rewindsSeen?: number } = { afterId: 0 },
): SqlQuery {
  return db.dialect.poll(table(name), {
    lease: LEASE,
    ordering: 'group',
    limit: 100,
    ...at,
    dueBefore: null,
    now: Date.now(),
    parkDead: false, // the default onDead: 'continue', as the worker passes it
  });
}

/** Client p50 and server time of the poll, for a row's note. */
export async function pollFigures<Tx>(ctx: Ctx<Tx>, query: SqlQuery, iterations: number) {
  const current = await ctx.db.timeStatement(query, iterations);
  const currentServer = await ctx.db.serverTime([query]);
  const describe = () =>
    `server time ${formatMs(currentServer)} ms (${ctx.db.serverTimeLabel}, median of 15); p95 at the client ${formatMs(current.p95)} ms`;
  return { current, currentServer, describe };
}

export function publishOnly<Tx>(db: BenchDatabase<Tx>, name: string) {
  return new Outboxer({ database: db.adapter(), relay: false, outboxes: { bench: { table: name } } });
}
