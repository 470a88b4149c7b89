/**
 * Connection accounting on one real Postgres: a publish-only instance opens no connection of its
 * own yet publishes and administers; a relaying node holds at most one pooled connection per
 * partition plus two, and one listener outside the pool; a lease renewal during a long delivery
 * waits for the round's statement instead of taking a second connection.
 */
import pg from 'pg';
import { describe, expect, test } from 'vitest';
import { Outboxer, functionRelay } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { DATABASE_URL, publishInTransaction } from '../support/databases.js';
import { sleep, waitUntil } from '../support/random.js';
import { fixture, instance, newTable, setUpPostgres } from './support.js';

setUpPostgres();

/** Migrates and starts `node`, then publishes `count` messages to `events` in one transaction. */
async function startWithBacklog(node: Outboxer, count: number, groupKey: (i: number) => string) {
  await node.migrate();
  await node.start();
  await publishInTransaction(
    fixture,
    node,
    Array.from({ length: count }, (_, i) => ({ outbox: 'events', payload: i, groupKey: groupKey(i) })),
  );
}

/**
 * The most pooled connections of this file seen waiting on a lock at once, over `ms`: the
 * coordinator's heartbeat (it writes `<table>_nodes`, and reads the tallies to tell whether their
 * upkeep is due) apart from the rest.
 */
async function mostWaitingOnLock(ms: number): Promise<{ heartbeat: number; others: number }> {
  const most = { heartbeat: 0, others: 0 };
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const waiting = (await fixture.query(
      `SELECT query FROM pg_stat_activity WHERE application_name = '${fixture.schema}' AND wait_event_type = 'Lock'`,
    )) as Array<{ query: string }>;
    const heartbeat = waiting.filter((w) => w.query.includes('_nodes"')).length;
    most.heartbeat = Math.max(most.heartbeat, heartbeat);
    most.others = Math.max(most.others, waiting.length - heartbeat);
    await sleep(10);
  }
  return most;
}

describe('publish-only instances and connections', () => {
  test('relay: false opens no connection of its own (no workers, no listener), yet publishes and administers', async () => {
    const pool = new pg.Pool({
      connectionString: DATABASE_URL,
      max: 3,
      options: `-c search_path=${fixture.schema}`,
      application_name: fixture.schema,
    });
    const table = newTable();
    try {
      const node = new Outboxer({
        database: nodePostgres(pool),
        outboxes: { events: { table, notify: true } },
        relay: false,
      });
      await node.start();
      await sleep(300);
      expect(pool.totalCount).toBe(0);
      const listeners = await fixture.query(
        `SELECT 1 FROM pg_stat_activity WHERE application_name = '${fixture.schema}:outboxer-listener'`,
      );
      expect(listeners).toHaveLength(0);
      await node.migrate();
      const client = await pool.connect();
      await client.query('BEGIN');
      await node.publish(client, 'events', { hello: 'world' });
      await client.query('COMMIT');
      client.release();
      expect((await node.counts('events')).pending).toBe(1);
      await node.stop();
    } finally {
      await pool.end();
    }
  });

  test('a relaying node holds at most one pooled connection per partition plus two, and one listener outside the pool', async () => {
    const table = newTable();
    const pool = new pg.Pool({
      connectionString: DATABASE_URL,
      max: 30,
      options: `-c search_path=${fixture.schema}`,
      application_name: fixture.schema,
    });
    // Counted on the pool's own events, not sampled: a connection held for a millisecond counts.
    let busy = 0;
    let peak = 0;
    pool.on('acquire', () => (peak = Math.max(peak, ++busy)));
    pool.on('release', () => (busy -= 1));
    let delivered = 0;
    const node = new Outboxer({
      database: nodePostgres(pool),
      outboxes: {
        events: {
          table,
          partitions: 4,
          notify: true,
          pollInterval: 5,
          batchSize: 30,
          // Kept and pruned, so that the pruner and the tallies' upkeep both run alongside.
          retention: { keep: 1 },
          pruneInterval: 20,
          // 30 messages of 25 ms each outlast leaseTimeout / 3: the lease is renewed mid-delivery.
          // A 2 s lease: with 300 ms, a CI run at load ~10 saw three backends waiting on the tallies'
          // lock instead of one (leases lapsing and partitions changing hands under that load).
          relay: functionRelay(async () => {
            await sleep(25);
            delivered += 1;
          }),
        },
      },
      leaseTimeout: 2_000,
    });
    try {
      await startWithBacklog(node, 600, (i) => `g${i % 40}`);
      await waitUntil(() => delivered >= 600, 30_000, 'every message delivered');
      await waitUntil(
        async () => (await fixture.query(`SELECT 1 FROM "${table}" WHERE status <> 4`)).length === 0,
        10_000,
        'every delivery acknowledged',
      );
      // Hold the tallies for longer than the rows are kept: whatever reads or writes them waits,
      // and the pruner, with rows now due, must wait its turn rather than take a connection.
      const waitingOnLock = await fixture.transaction(async (tx) => {
        await tx.query(`LOCK TABLE "${table}_tallies" IN ACCESS EXCLUSIVE MODE`);
        return mostWaitingOnLock(2_000);
      });
      await waitUntil(
        async () => (await fixture.query(`SELECT 1 FROM "${table}"`)).length === 0,
        10_000,
        'the kept rows to be pruned',
      );
      // The heartbeat reads the tallies, so it waits; a housekeeping statement that started before
      // the lock waits too. Never two of those: the pruner waits its turn behind the tallies'
      // upkeep on the one housekeeping lane. The "plus two" of the bound.
      expect(waitingOnLock.heartbeat + waitingOnLock.others).toBeGreaterThanOrEqual(1);
      expect(waitingOnLock.others).toBeLessThanOrEqual(1);
      expect(waitingOnLock.heartbeat).toBeLessThanOrEqual(1);
      expect(peak).toBeGreaterThanOrEqual(2);
      expect(peak).toBeLessThanOrEqual(4 + 2);
      const listeners = await fixture.query(
        `SELECT 1 FROM pg_stat_activity WHERE application_name = '${fixture.schema}:outboxer-listener'`,
      );
      expect(listeners).toHaveLength(1);
    } finally {
      await node.stop();
      await pool.end();
    }
  });
  test('a lease renewal during a long delivery waits for the statement the round runs meanwhile, instead of taking a second connection', async () => {
    const table = newTable();
    const locker = await fixture.pool.connect();
    let delivered = 0;
    let lockHeld!: () => void;
    const leaseLocked = new Promise<void>((resolve) => (lockHeld = resolve));
    // Batches of 10 messages of 20 ms: each delivery outlasts leaseTimeout / 3 (100 ms).
    const node = instance(
      table,
      {
        partitions: 1,
        batchSize: 10,
        relay: functionRelay(async () => {
          await sleep(20);
          delivered += 1;
          if (delivered === 20) {
            // Before the second batch's acknowledgement goes out with the third batch's poll, the
            // test takes the lease row: that statement, then the renewal, find it locked.
            await locker.query('BEGIN');
            await locker.query(`SELECT 1 FROM "${table}_leases" FOR UPDATE`);
            lockHeld();
          }
        }),
      },
      { leaseTimeout: 300 },
    );
    try {
      await startWithBacklog(node, 60, () => 'g');
      await leaseLocked;
      const waitingOnLock = await mostWaitingOnLock(400);
      await locker.query('COMMIT');
      // The round's statement waits, and the renewal waits for it rather than beside it.
      expect(waitingOnLock.others).toBe(1);
      expect(waitingOnLock.heartbeat).toBeLessThanOrEqual(1);
      await waitUntil(async () => (await node.counts('events')).pending === 0, 10_000, 'the outbox to drain');
      expect(delivered).toBe(60);
    } finally {
      locker.release();
      await node.stop();
    }
  });
});
