/**
 * Postgres acknowledges a batch and polls the next one in one statement while a backlog drains.
 * The poll runs on the statement's snapshot, which still shows the rows it deletes: these tests
 * check it never hands out an acknowledged row, is fenced on the lease, and keeps group order.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  Outboxer,
  SKIPPED,
  batchRelay,
  type DatabaseAdapter,
  type DeliveryOutcome,
  type Envelope,
  type SqlQuery,
  type Statement,
} from 'outboxer';
import { postgresDialect } from 'outboxer/pg';
import { postgresFixture } from '../support/databases.js';
import { seededRandom, waitUntil } from '../support/random.js';

type PgFixture = Awaited<ReturnType<typeof postgresFixture>>;

const table = { schema: undefined, name: 'ahead' };
const lease = { outbox: 'ahead', partition: 0, owner: 'me', epoch: 3 };

function settleParams(delivered: number[], keep = false) {
  return {
    lease,
    now: Date.now(),
    delivered,
    failed: [],
    unblockedGroups: [],
    keep,
    ttl: 30_000,
    parkDead: false,
  };
}

function pollParams(afterId: number, exclude: number[], limit = 10) {
  return {
    lease,
    ordering: 'group' as const,
    limit,
    afterId,
    dueBefore: null,
    now: Date.now(),
    parkDead: false,
    exclude,
  };
}

describe('acknowledgeAndPoll on postgres', () => {
  let fixture: PgFixture;
  let ids: number[];

  beforeAll(async () => {
    fixture = await postgresFixture();
    const outboxer = new Outboxer({
      database: fixture.database,
      relay: false,
      outboxes: { ahead: { table: 'ahead' } },
    });
    await outboxer.migrate();
    await fixture.transaction(async (tx) => {
      ids = await outboxer.publishMany(
        tx,
        ['a1', 'a2', 'a3', 'r', 'b1', 'b2', 'c1'].map((p) => ({
          outbox: 'ahead',
          payload: p,
          groupKey: p === 'r' ? null : p[0]!,
        })),
      );
    });
    // The unordered message `r` waits for a retry that is due now.
    await fixture.query(
      `UPDATE ahead SET status = 1, attempts = 1, next_attempt_at = now() - interval '1 second' WHERE id = $1`,
      [ids[3]],
    );
    await fixture.query(`INSERT INTO ahead_leases VALUES ('ahead', 0, 'me', 3, now() + interval '1 hour')`);
  });

  afterAll(() => fixture.close());

  const run = (query: SqlQuery) => fixture.database.execute(query);
  const read = async <R>(statement: Statement<R>) => statement.read(await run(statement));

  test('a lost lease acknowledges nothing and polls nothing', async () => {
    const stale = { ...lease, epoch: 2 };
    const polled = await read(
      postgresDialect.acknowledgeAndPoll!(
        table,
        { ...settleParams([ids[0]!]), lease: stale },
        { ...pollParams(ids[0]!, [ids[0]!]), lease: stale },
      ),
    );
    expect(polled, 'the lease was lost').toBeUndefined();
    expect(await fixture.query(`SELECT count(*)::int AS n FROM ahead`)).toEqual([{ n: 7 }]);
  });

  test('acknowledged rows, ready below the cursor or retried, are not polled again', async () => {
    // Delivered: a1, a2 (ready, at or below the cursor) and r (a retry).
    const polled = await read(
      postgresDialect.acknowledgeAndPoll!(
        table,
        settleParams([ids[0]!, ids[1]!, ids[3]!]),
        pollParams(ids[1]!, [ids[0]!, ids[1]!, ids[3]!]),
      ),
    );
    expect(polled, 'the lease is held').toBeDefined();
    expect(polled!.messages.map((m) => m.id)).toEqual([ids[2], ids[4], ids[5], ids[6]]);
    expect(polled!.messages.map((m) => m.envelope().payload)).toEqual(['a3', 'b1', 'b2', 'c1']);
    const left = await fixture.query(`SELECT id FROM ahead ORDER BY id`);
    expect(left.map((row) => Number(row.id))).toEqual([ids[2], ids[4], ids[5], ids[6]]);
  });

  test('with `keep`, acknowledged rows turn delivered and are not polled again', async () => {
    const polled = await read(
      postgresDialect.acknowledgeAndPoll!(
        table,
        settleParams([ids[2]!, ids[4]!], true),
        pollParams(ids[4]!, [ids[2]!, ids[4]!]),
      ),
    );
    expect(polled!.messages.map((m) => m.id)).toEqual([ids[5], ids[6]]);
    const delivered = await fixture.query(`SELECT id FROM ahead WHERE status = 4 ORDER BY id`);
    expect(delivered.map((row) => Number(row.id))).toEqual([ids[2], ids[4]]);
  });

  test('an empty poll still says the lease is held', async () => {
    const polled = await read(
      postgresDialect.acknowledgeAndPoll!(
        table,
        settleParams([ids[5]!, ids[6]!]),
        pollParams(ids[6]!, [ids[5]!, ids[6]!]),
      ),
    );
    expect(polled, 'the lease is held').toBeDefined();
    expect(polled!.messages).toEqual([]);
  });

  test('an acknowledgement commits without waiting for its WAL flush, and only its own transaction does', async () => {
    // Run inside a transaction block, the statement's setting is visible after it; in autocommit
    // it lasts until the statement's own commit.
    const client = await fixture.pool.connect();
    try {
      const show = async () => (await client.query('SHOW synchronous_commit')).rows[0].synchronous_commit;
      expect(await show()).toBe('on');
      for (const query of [
        postgresDialect.settle(table, settleParams([ids[0]!]))[0]!,
        postgresDialect.acknowledgeAndPoll!(table, settleParams([ids[0]!]), pollParams(0, [ids[0]!])),
      ]) {
        await client.query('BEGIN');
        await client.query(query.text, query.values as unknown[]);
        expect(await show()).toBe('off');
        await client.query('ROLLBACK');
        expect(await show()).toBe('on');
      }
    } finally {
      client.release();
    }
  });
});

/** Counts the statements by kind, passing them on to the real adapter. */
function countingAdapter(inner: DatabaseAdapter) {
  const counts = { polls: 0, pollsAhead: 0 };
  const adapter: DatabaseAdapter = {
    ...inner,
    dialect: inner.dialect,
    sync: inner.sync,
    executeInTransaction: (tx, query) => inner.executeInTransaction(tx, query),
    executeAtomically: (queries) => inner.executeAtomically(queries),
    async execute(query) {
      if (query.text.includes('lease_epoch')) counts.pollsAhead += 1;
      else if (query.text.startsWith('WITH snap')) counts.polls += 1;
      return inner.execute(query);
    },
  };
  return { adapter, counts };
}

describe('a worker draining a backlog on postgres', () => {
  let fixture: PgFixture;
  beforeAll(async () => {
    fixture = await postgresFixture();
  });
  afterAll(() => fixture.close());

  test('polls with its acknowledgements, delivers each message once, and keeps group order', async () => {
    const { adapter, counts } = countingAdapter(fixture.database);
    const deliveries: Envelope[] = [];
    const failedOnce = new Set<number>();
    const outboxer = new Outboxer({
      database: adapter,
      outboxes: {
        drain: {
          table: 'drain',
          batchSize: 50,
          backoff: { min: 1, max: 1 },
          relay: batchRelay(async (batch) => {
            // A few unordered messages fail once: its retry comes back in a later round,
            // which then acknowledges a retried row and polls ahead in the same statement.
            const refuse = batch.find(
              (m) => (m.payload as { i: number }).i % 300 === 0 && !failedOnce.has(m.id),
            );
            if (refuse !== undefined) {
              failedOnce.add(refuse.id);
              deliveries.push(...batch.filter((m) => m !== refuse));
              return batch.map((m) =>
                m === refuse ? { ok: false, error: new Error('later') } : { ok: true },
              );
            }
            deliveries.push(...batch);
          }),
        },
      },
    });
    await outboxer.migrate();
    const total = 3_000;
    await fixture.transaction(async (tx) => {
      await outboxer.publishMany(
        tx,
        Array.from({ length: total }, (_, i) => ({
          outbox: 'drain',
          payload: { i },
          groupKey: i % 3 === 0 ? null : `g${i % 17}`,
        })),
      );
    });
    await outboxer.start();
    await waitUntil(async () => (await outboxer.counts('drain')).pending === 0, 60_000, 'the drain');
    await outboxer.stop();

    const ids = deliveries.map((m) => m.id);
    expect(new Set(ids).size).toBe(total);
    expect(ids).toHaveLength(total); // no fault, so no message is delivered twice
    const lastOfGroup = new Map<string, number>();
    for (const m of deliveries) {
      if (m.groupKey === null) continue;
      expect(m.id).toBeGreaterThan(lastOfGroup.get(m.groupKey) ?? 0);
      lastOfGroup.set(m.groupKey, m.id);
    }
    expect(failedOnce.size).toBeGreaterThan(0);
    // 60 batches at least; most of them were polled by the previous acknowledgement.
    expect(counts.pollsAhead).toBeGreaterThan(counts.polls);
    await outboxer.close();
  });
  test('the next batch, polled while a group fails or is skipped, never overtakes it', async () => {
    const random = seededRandom(41);
    const accepted: Envelope[] = [];
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: {
        pipelined: {
          table: 'pipelined',
          batchSize: 20,
          backoff: { min: 1, max: 5 },
          relay: batchRelay(async (batch) => {
            // Small batches over few groups: the batch polled meanwhile nearly always holds later
            // messages of a group that fails (or that the relay skips) in this one.
            // A well-behaved relay: after a group fails or is skipped, its later messages in the
            // batch are skipped too, and never reach the destination.
            const stopped = new Set<string>();
            const outcomes = batch.map((m): DeliveryOutcome => {
              if (stopped.has(m.groupKey!)) return { ok: false, error: SKIPPED };
              const roll = random();
              if (roll < 0.15) stopped.add(m.groupKey!);
              if (roll < 0.1) return { ok: false, error: new Error('refused') };
              if (roll < 0.15) return { ok: false, error: SKIPPED };
              accepted.push(m);
              return { ok: true };
            });
            return outcomes;
          }),
        },
      },
    });
    await outboxer.migrate();
    const total = 2_000;
    await fixture.transaction(async (tx) => {
      await outboxer.publishMany(
        tx,
        Array.from({ length: total }, (_, i) => ({
          outbox: 'pipelined',
          payload: { i },
          groupKey: `g${i % 7}`,
        })),
      );
    });
    await outboxer.start();
    await waitUntil(async () => (await outboxer.counts('pipelined')).pending === 0, 90_000, 'the drain');
    await outboxer.stop();

    // The relay accepted each message once, and each group in id order, although the engine
    // dropped an accepted message's group-mates whenever an earlier one failed.
    const ids = accepted.map((m) => m.id);
    expect(new Set(ids).size).toBe(total);
    const lastOfGroup = new Map<string, number>();
    for (const m of accepted) {
      expect(m.id).toBeGreaterThan(lastOfGroup.get(m.groupKey!) ?? 0);
      lastOfGroup.set(m.groupKey!, m.id);
    }
    await outboxer.close();
  });

  test('the statement that runs alongside a delivery is sent before the relay gets its batch', async () => {
    // pg's pool hands out its client in process.nextTick: unless the worker lets that tick run,
    // the statement acknowledging batch n - 1 and polling n + 1 leaves only after batch n was
    // decoded and delivered, and the database waits for the relay instead of working beside it.
    const events: string[] = [];
    const watched = new WeakSet<object>();
    fixture.pool.on('acquire', (client) => {
      if (watched.has(client)) return;
      watched.add(client);
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as { query: unknown }).query = (...args: unknown[]) => {
        const config = args[0] as { text?: string; values?: unknown[] };
        // acknowledgeAndPoll's $6 is the acknowledged ids, as an array literal.
        if (config.text?.includes('acknowledged AS') && config.text.includes('start AS')) {
          events.push(`ack ${String(config.values![5]).match(/\d+/)![0]}`);
        }
        return query(...args);
      };
    });
    const batches: number[] = [];
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: {
        beside: {
          table: 'beside',
          batchSize: 20,
          relay: batchRelay(async (batch) => {
            batches.push(batch[0]!.id);
            events.push(`deliver ${batch[0]!.id}`);
          }),
        },
      },
    });
    await outboxer.migrate();
    await fixture.transaction(async (tx) => {
      await outboxer.publishMany(
        tx,
        Array.from({ length: 400 }, (_, i) => ({ outbox: 'beside', payload: { i }, groupKey: `g${i % 7}` })),
      );
    });
    await outboxer.start();
    await waitUntil(async () => (await outboxer.counts('beside')).pending === 0, 60_000, 'the drain');
    await outboxer.close();

    let checked = 0;
    for (let n = 1; n < batches.length; n += 1) {
      const ack = events.indexOf(`ack ${batches[n - 1]}`);
      if (ack === -1) continue; // acknowledged on its own (the end of the backlog)
      expect(ack, `batch ${n - 1} acknowledged before batch ${n} was delivered`).toBeLessThan(
        events.indexOf(`deliver ${batches[n]}`),
      );
      checked += 1;
    }
    expect(checked).toBeGreaterThan(15);
  });

  test('stop() acknowledges the last delivered batch, whose acknowledgement was to ride on the next poll', async () => {
    const delivered: number[] = [];
    let stopping: Promise<void> | undefined;
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: {
        stopping: {
          table: 'stopping',
          batchSize: 50,
          relay: batchRelay(async (batch) => {
            delivered.push(...batch.map((m) => m.id));
            if (delivered.length >= 1_000) stopping ??= outboxer.stop();
          }),
        },
      },
    });
    await outboxer.migrate();
    await fixture.transaction(async (tx) => {
      await outboxer.publishMany(
        tx,
        Array.from({ length: 5_000 }, (_, i) => ({
          outbox: 'stopping',
          payload: { i },
          groupKey: `g${i % 13}`,
        })),
      );
    });
    await outboxer.start();
    await waitUntil(() => stopping !== undefined, 60_000, 'the stop');
    await stopping;

    // Every delivered message is gone from the table; the rest are still there.
    const left = await fixture.query(`SELECT id FROM stopping`);
    const leftIds = new Set(left.map((row) => Number(row.id)));
    expect(delivered.filter((id) => leftIds.has(id))).toEqual([]);
    expect(leftIds.size + new Set(delivered).size).toBe(5_000);
    await outboxer.close();
  });
});
