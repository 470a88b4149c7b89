/** What a peer library offers the peer rows (bench/peers.ts), and how its delivery is figured. */
import type pg from 'pg';
import type { Figure } from './report.js';

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
