/**
 * What a peer library offers the peer rows (bench/peers.ts, bench/peers-publish.ts,
 * bench/peers-deliver.ts), how its delivery is figured, and how a row judges outboxer against the
 * peers. Measures nothing itself.
 */
import type pg from 'pg';
import { judge, type BenchContext } from './context.js';
import type { PostgresBench } from './postgres.js';
import type { Figure, PeerRow } from './report.js';
import { groupKey } from './support.js';

/** The group keys the peers publish to and deliver. */
export const GROUPS = 10_000;

/** One of the {@link GROUPS} keys at random, for a published message. */
export const randomKey = (): string => groupKey(Math.floor(Math.random() * GROUPS), GROUPS);

export type Publisher = {
  /** One message in the caller's transaction. */
  one(client: pg.PoolClient, n: number): Promise<unknown>;
  /** 100 messages in the caller's transaction; absent for the references, measured on one message. */
  hundred?(client: pg.PoolClient, n: number): Promise<unknown>;
  /** Empties its table between trials. */
  reset(): Promise<void>;
};

export interface Peer {
  readonly name: string;
  readonly publisher?: Publisher;
  /** Fills `count` messages and delivers them with a handler that only counts, for at most `capMs`. */
  relay?(count: number, capMs: number): Promise<{ figure: Figure; note?: string }>;
  readonly unavailable?: string;
  close(): Promise<void>;
}

/** A peer's delivery rate since `started`, and a note when it stopped at the cap before the end. */
export function deliverFigure(delivered: number, count: number, started: number, capMs: number) {
  const elapsed = (performance.now() - started) / 1000;
  return {
    figure: { value: delivered / elapsed, unit: 'msg/s' as const },
    note:
      delivered < count
        ? `stopped after ${capMs / 1000} s: ${delivered.toLocaleString('en-US')} of ${count.toLocaleString('en-US')}`
        : undefined,
  };
}

/**
 * The target of a row against the peers, ≥ 2× each; where a 2× lies above the plain INSERT or the
 * floor (`references`), the measure says so.
 */
export function judgePeers(
  ctx: BenchContext<PostgresBench>,
  ours: number | undefined,
  peers: PeerRow['peers'],
  references: { plain?: number; floor?: number } = {},
  /** Ours against a peer as the median of per-trial ratios, where trials alternate. */
  pairedRatio?: (name: string) => number | undefined,
): PeerRow['target'] {
  const measured = peers.filter((p) => p.figure !== undefined);
  if (ours === undefined || measured.length === 0)
    return { text: '≥ 2× each peer', measured: '–', met: undefined };
  const ratios = measured.map((p) => ({
    name: p.name,
    ratio: pairedRatio?.(p.name) ?? ours / p.figure!.value,
    twice: 2 * p.figure!.value,
  }));
  const worst = ratios.reduce((a, b) => (a.ratio <= b.ratio ? a : b));
  const missing = peers.length - measured.length;
  // A missed 2× above a reference: past the floor no library could reach it on this machine, past
  // the plain INSERT none that writes outboxer's row.
  const beyond = (r: (typeof ratios)[number]): string => {
    if (r.ratio >= 2) return '';
    const twice = `2× is ${Math.round(r.twice).toLocaleString('en-US')}`;
    const { plain, floor } = references;
    if (floor !== undefined && r.twice > floor) return ` (${twice}, above the floor)`;
    if (plain !== undefined && r.twice > plain) return ` (${twice}, above the plain INSERT)`;
    return '';
  };
  return {
    text: '≥ 2× each peer',
    measured: `${ratios.map((r) => `${r.ratio.toFixed(2)}× ${r.name}${beyond(r)}`).join(', ')}`,
    met: missing > 0 ? undefined : judge(ctx, worst.ratio >= 2),
  };
}
