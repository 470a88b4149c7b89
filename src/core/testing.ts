import { run, type LeaseToken } from './database.js';
import { OutboxerError } from './errors.js';
import type { Envelope } from './relay.js';
import { PollCursor, runRound, type WorkerDeps } from './worker/index.js';

export interface DrainOptions {
  /**
   * Poll-deliver rounds per partition before giving up on messages that keep failing (a strict
   * outbox retries a poison message forever). Default 50.
   */
  maxRounds?: number;
}

/** What {@link Outboxer.drain} did. */
export interface DrainResult {
  /** Messages the relays confirmed, in delivery order. */
  delivered: Envelope[];
  /** Failed attempts that were scheduled for a retry, with their error. */
  retried: Array<{ envelope: Envelope; error: string }>;
  /** Messages that went dead. */
  dead: Array<{ envelope: Envelope; error: string }>;
  /** Messages still pending when draining stopped (0 unless something kept failing). */
  pending: number;
  rounds: number;
}

/**
 * Delivers an outbox's partitions one after another through the real relay, treating every
 * retry as due (no waiting for backoff), until nothing is pending or `maxRounds` is reached.
 */
export async function drainOutbox(
  deps: WorkerDeps,
  owner: string,
  options: DrainOptions,
): Promise<DrainResult> {
  const maxRounds = options.maxRounds ?? 50;
  const result: DrainResult = { delivered: [], retried: [], dead: [], pending: 0, rounds: 0 };
  const { adapter, outbox } = deps;
  for (let partition = 0; partition < outbox.partitions; partition += 1) {
    const epoch = await run(
      adapter,
      adapter.dialect.acquireLease(outbox.table, {
        outbox: outbox.name,
        partition,
        owner,
        ttl: deps.leaseTimeout,
        now: Date.now(),
      }),
    );
    if (epoch === undefined) {
      throw new OutboxerError(
        'INVALID_STATE',
        `drain(): partition ${partition} of outbox "${outbox.name}" is held by a running relay.`,
      );
    }
    const lease: LeaseToken = { outbox: outbox.name, partition, owner, epoch };
    const cursor = new PollCursor(Number.MAX_SAFE_INTEGER, deps.adapter.dialect.capabilities.pollCursor);
    const signal = new AbortController().signal;
    try {
      for (let round = 0; round < maxRounds; round += 1) {
        const outcome = await runRound(deps, {
          lease,
          cursor,
          dueBefore: 'infinity',
          signal,
        });
        result.rounds = Math.max(result.rounds, round + 1);
        const settlement = outcome.settlement;
        if (settlement !== undefined) {
          result.delivered.push(...settlement.delivered.map(strip));
          for (const f of settlement.failed)
            (f.dead ? result.dead : result.retried).push({ envelope: strip(f.envelope), error: f.error });
        }
        if (outcome.idle && !outcome.full) break;
      }
    } finally {
      await run(adapter, adapter.dialect.releaseLease(outbox.table, lease));
    }
  }
  result.pending = (
    await run(adapter, adapter.dialect.counts(outbox.table, outbox.name, outbox.partitions))
  ).pending;
  return result;
}

function strip(envelope: Envelope & { status?: number; blocked?: boolean }): Envelope {
  const { status: _s, blocked: _b, ...rest } = envelope;
  return rest;
}

/** What several outboxes' drains did, together. */
export function mergeDrainResults(results: readonly DrainResult[]): DrainResult {
  return {
    delivered: results.flatMap((r) => r.delivered),
    retried: results.flatMap((r) => r.retried),
    dead: results.flatMap((r) => r.dead),
    pending: results.reduce((n, r) => n + r.pending, 0),
    rounds: Math.max(0, ...results.map((r) => r.rounds)),
  };
}
