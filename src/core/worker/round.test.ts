import { describe, expect, test } from 'vitest';
import type { DatabaseAdapter } from '../database.js';
import type { Dialect, PollParams, PollResult, PolledMessage, SettleParams } from '../dialect.js';
import { silentLogger } from '../logger.js';
import { resolveOutbox } from '../options.js';
import type { DeliveryOutcome, Relay } from '../relay.js';
import { batch, statement, Status, type Row, type SqlQuery } from '../sql.js';
import { PollCursor } from './cursor.js';
import type { WorkerDeps } from './deps.js';
import { idleDelay, Pipeline, runRound, writeDeferred } from './round.js';
import { makeEnvelope } from '../../../test/support/envelopes.js';

/**
 * A dialect over an in-memory partition of ready messages without groups: each statement records
 * what it was asked, and its reader reads the store as the statement would have left it.
 */
function fakeDatabase(
  ids: number[],
  options: {
    failing?: number[];
    nextRetry?: { at: number | null; now: number };
    /** An empty poll also reads this next retry, as the Postgres poll does. */
    pollNextRetry?: { at: number | null; now: number };
  } = {},
) {
  const pending = new Set(ids);
  const log: string[] = [];
  let leaseHeld = true;
  const message = (id: number): PolledMessage => ({
    id,
    status: Status.ready,
    blocked: false,
    groupKey: null,
    envelope: () => ({ ...makeEnvelope({ id, outbox: 'orders' }), status: Status.ready, blocked: false }),
  });
  const poll = (params: PollParams): PollResult => {
    const exclude = new Set(params.exclude ?? []);
    const found = [...pending]
      .filter((id) => id > params.afterId && !exclude.has(id))
      .sort((a, b) => a - b)
      .slice(0, params.limit);
    const nextRetry = found.length === 0 ? options.pollNextRetry : undefined;
    return { messages: found.map(message), start: undefined, publishersQuiet: false, nextRetry };
  };
  const write = (params: SettleParams): void => {
    for (const id of params.delivered) pending.delete(id);
    for (const failure of params.failed) pending.delete(failure.id);
  };
  const query = (text: string): SqlQuery => ({ text, values: [] });
  const dialect = {
    capabilities: { pollCursor: true },
    poll: (_table: unknown, params: PollParams) => {
      const text = `poll after ${params.afterId}${params.exclude ? ` excluding ${params.exclude.join(',')}` : ''}`;
      return statement(query(text), () => poll(params));
    },
    acknowledgeAndPoll: (_table: unknown, settle: SettleParams, params: PollParams) =>
      statement(
        query(
          `acknowledge ${settle.delivered.join(',')} and poll after ${params.afterId} excluding ${params.exclude!.join(',')}`,
        ),
        () => {
          if (!leaseHeld) return undefined;
          write(settle);
          return poll(params);
        },
      ),
    settle: (_table: unknown, params: SettleParams) =>
      batch(
        [
          query(
            `settle ${params.delivered.join(',')}${params.failed.length > 0 ? ` failing ${params.failed.map((f) => f.id).join(',')}` : ''}`,
          ),
        ],
        () => {
          if (leaseHeld) write(params);
          return { leaseHeld, released: [] };
        },
      ),
    nextRetryAt: () =>
      statement(query('next retry'), () => options.nextRetry ?? { at: null, now: Number.NaN }),
    renewLease: () => statement(query('renew'), () => leaseHeld),
  } as unknown as Dialect;
  const adapter = {
    dialect,
    sync: false,
    execute: async (q: SqlQuery): Promise<Row[]> => {
      log.push(q.text);
      return [];
    },
    executeAtomically: async (qs: readonly SqlQuery[]): Promise<Row[][]> => {
      log.push(`atomically ${qs.map((q) => q.text).join('; ')}`);
      return qs.map(() => []);
    },
  } as unknown as DatabaseAdapter<unknown, boolean>;
  const delivered: number[][] = [];
  const failing = new Set(options.failing ?? []);
  const relay: Relay = {
    deliver: async (messages): Promise<DeliveryOutcome[]> => {
      delivered.push(messages.map((m) => m.id));
      return messages.map((m) => (failing.has(m.id) ? { ok: false, error: new Error('no') } : { ok: true }));
    },
  };
  const outbox = resolveOutbox(
    'orders',
    { relay, batchSize: 2, maxAttempts: 1 },
    { relaying: true, schema: undefined },
  );
  const deps: WorkerDeps = {
    adapter,
    outbox,
    destination: relay,
    instance: 'test',
    leaseTimeout: 30_000,
    maxErrorLength: 1000,
    logger: silentLogger,
  };
  const lease = { outbox: 'orders', partition: 0, owner: 'test', epoch: 1 };
  return {
    deps,
    log,
    delivered,
    pending,
    loseLease: () => (leaseHeld = false),
    options: (pipeline?: Pipeline) => ({
      lease,
      cursor: new PollCursor(60_000),
      dueBefore: null,
      signal: new AbortController().signal,
      ...(pipeline ? { pipeline } : {}),
    }),
  };
}

describe('Pipeline', () => {
  test('hands over what a round offered once, and forgets it when dropped', () => {
    const pipeline = new Pipeline();
    expect(pipeline.take()).toBeUndefined();
    const polled: PollResult = { messages: [], start: undefined, publishersQuiet: false };
    const deferred = { delivered: [], failed: [], skipped: [], unblockedGroups: [], newlyBlocked: [] };
    pipeline.offer(polled, deferred);
    expect(pipeline.take()).toEqual({ polled, deferred });
    expect(pipeline.take()).toBeUndefined();
    pipeline.offer(polled, deferred);
    pipeline.drop();
    expect(pipeline.take()).toBeUndefined();
  });
});

describe('runRound', () => {
  test('while a backlog drains, polls ahead during delivery and acknowledges with the next poll', async () => {
    const db = fakeDatabase([1, 2, 3, 4, 5]);
    const pipeline = new Pipeline();
    const options = db.options(pipeline);
    const rounds = [];
    for (let i = 0; i < 4; i += 1) {
      const round = await runRound(db.deps, options);
      rounds.push({ idle: round.idle, full: round.full, leaseLost: round.leaseLost });
    }
    expect(db.delivered).toEqual([[1, 2], [3, 4], [5]]);
    expect(db.log).toEqual([
      'poll after 0',
      'poll after 2 excluding 1,2',
      'acknowledge 1,2 and poll after 4 excluding 1,2,3,4',
      'settle 3,4',
      'settle 5',
      'poll after 5',
    ]);
    expect(rounds).toEqual([
      { idle: false, full: true, leaseLost: false },
      { idle: false, full: true, leaseLost: false },
      { idle: false, full: true, leaseLost: false },
      { idle: true, full: false, leaseLost: false },
    ]);
    expect(pipeline.take()).toBeUndefined();
    expect(db.pending.size).toBe(0);
  });

  test('without a pipeline, every round polls for itself and writes its own settlement', async () => {
    const db = fakeDatabase([1, 2, 3]);
    const options = db.options();
    await runRound(db.deps, options);
    await runRound(db.deps, options);
    expect(db.log).toEqual(['poll after 0', 'settle 1,2', 'poll after 2', 'settle 3']);
  });

  test('drops the poll ahead when the batch delivered meanwhile failed, and settles at once', async () => {
    const db = fakeDatabase([1, 2, 3, 4, 5], { failing: [2] });
    const pipeline = new Pipeline();
    const round = await runRound(db.deps, db.options(pipeline));
    expect(round.settlement?.failed.map((f) => f.id)).toEqual([2]);
    expect(db.log).toEqual(['poll after 0', 'poll after 2 excluding 1,2', 'settle 1 failing 2']);
    expect(pipeline.take()).toBeUndefined();
  });

  test('a stopping worker writes the acknowledgement left in the pipeline', async () => {
    const db = fakeDatabase([1, 2, 3, 4]);
    const pipeline = new Pipeline();
    const options = db.options(pipeline);
    await runRound(db.deps, options);
    await writeDeferred(db.deps, { ...options, pipeline });
    await writeDeferred(db.deps, { ...options, pipeline });
    expect(db.log).toEqual(['poll after 0', 'poll after 2 excluding 1,2', 'settle 1,2']);
  });

  test('a lease lost with the acknowledgement reports it and leaves nothing in the pipeline', async () => {
    const db = fakeDatabase([1, 2, 3, 4, 5, 6]);
    const pipeline = new Pipeline();
    const options = db.options(pipeline);
    await runRound(db.deps, options);
    db.loseLease();
    const round = await runRound(db.deps, options);
    expect(round.leaseLost).toBe(true);
    expect(pipeline.take()).toBeUndefined();
  });
});

describe('idleDelay', () => {
  test('the poll interval when no retry waits, capped at a third of the lease', async () => {
    const db = fakeDatabase([]);
    expect(await idleDelay(db.deps, 0)).toBe(Math.min(db.deps.outbox.pollInterval, 10_000));
  });

  test('until the next retry, on the database clock, or the process clock when it gives none', async () => {
    expect(await idleDelay(fakeDatabase([], { nextRetry: { at: 1_000_050, now: 1_000_000 } }).deps, 0)).toBe(
      50,
    );
    const dueIn = await idleDelay(
      fakeDatabase([], { nextRetry: { at: Date.now() + 60, now: Number.NaN } }).deps,
      0,
    );
    expect(dueIn).toBeGreaterThan(0);
    expect(dueIn).toBeLessThanOrEqual(60);
  });

  test('an empty poll that read the next retry: the idle round carries it, and no second statement asks', async () => {
    const db = fakeDatabase([], { pollNextRetry: { at: 1_000_050, now: 1_000_000 } });
    const round = await runRound(db.deps, db.options());
    expect(round).toMatchObject({ idle: true, nextRetry: { at: 1_000_050, now: 1_000_000 } });
    expect(await idleDelay(db.deps, 0, round.nextRetry)).toBe(50);
    expect(db.log).toEqual(['poll after 0']);
  });

  test('an idle round that wrote a deferred acknowledgement after its poll does not trust the poll’s next retry', async () => {
    const db = fakeDatabase([], { pollNextRetry: { at: null, now: 1_000_000 } });
    const pipeline = new Pipeline();
    const polled: PollResult = {
      messages: [],
      start: undefined,
      publishersQuiet: false,
      nextRetry: { at: null, now: 1_000_000 },
    };
    const failed = [
      { id: 7, envelope: makeEnvelope({ id: 7, outbox: 'orders' }), error: 'no', dead: false, delay: 50 },
    ];
    pipeline.offer(polled, {
      delivered: [],
      failed,
      skipped: [],
      unblockedGroups: [],
      newlyBlocked: [],
    } as never);
    const round = await runRound(db.deps, db.options(pipeline));
    expect(round.idle).toBe(true);
    expect(round.nextRetry).toBeUndefined();
  });
});
