/**
 * The pg-boss receiver against real Postgres (pg-boss in a schema of its own), with the inbox in
 * the same server: our pg-boss relay inserts the jobs, `boss.work` runs them in batches through
 * the receiver. A batch with a commit that fails is failed and retried by pg-boss, none of it
 * completed before its commits; the jobs of that batch that had committed come back as duplicates
 * and have no second effect; with `store: true`, a batch is completed once stored and the inbox
 * processes its jobs later. No order is checked: pg-boss keeps none across a retry. Once per
 * pg-boss line (12, 11, 10: test/relays/pg-boss-lines.ts), the receiver being structural.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { Outboxer, type ReceiveOutcome } from 'outboxer';
import { pgBossJobId, pgBossReceiver, pgBossRelay, type PgBossJobLike } from 'outboxer/pg-boss';
import { nodePostgres } from 'outboxer/pg';
import { postgresFixture } from '../support/databases.js';
import { waitUntil } from '../support/random.js';
import { DATABASE_URL, lines, type Boss } from '../relays/pg-boss-lines.js';
import {
  clear,
  consumerOf,
  effects,
  orderSteps,
  pgRunner,
  recordEffect,
  type PostgresFixture,
  expectStoredThenProcessed,
  storingConsumerOf,
} from './support.js';

/** `work` and `offWork`, the same on every line (their own types differ). */
interface Worker {
  work(
    queue: string,
    options: { batchSize: number; pollingIntervalSeconds: number },
    handler: (jobs: PgBossJobLike[]) => Promise<unknown>,
  ): Promise<unknown>;
  offWork(queue: string): Promise<unknown>;
}

let fixture: PostgresFixture;
let consumer: Awaited<ReturnType<typeof consumerOf>>;
let runner: ReturnType<typeof pgRunner>;

beforeAll(async () => {
  fixture = await postgresFixture();
  consumer = await consumerOf(fixture, 'pgboss');
});
afterAll(async () => {
  await consumer.outboxer.close();
  await fixture.close();
});
beforeEach(async () => {
  await clear(fixture);
  runner = pgRunner(fixture.pool);
});

/** The relay's job id of an outbox message. */
const jobIdOf = (id: string): string => pgBossJobId({ outbox: 'orders', id: Number(id) });

const published = orderSteps(6, 2);

describe.each(lines)('the pg-boss receiver with $name', ({ name, create }) => {
  const schema = `pgboss_receiver_${randomBytes(4).toString('hex')}`;
  let boss: Boss;
  beforeAll(async () => {
    boss = create({ connectionString: DATABASE_URL, schema });
    await boss.start();
  });
  afterAll(async () => {
    await boss.stop();
    await fixture.pool.query(`DROP SCHEMA ${schema} CASCADE`);
  });

  /** A queue (3 retries, no delay) filled by the relay with `published`, through the outbox in `table`. */
  async function relayed(table: string): Promise<{ queue: string; ids: string[] }> {
    const queue = `orders_${randomBytes(4).toString('hex')}`;
    await boss.createQueue(queue, { retryLimit: 3, retryDelay: 0 });
    const producer = new Outboxer({
      database: nodePostgres(fixture.pool),
      testing: 'manual',
      logger: false,
      outboxes: { orders: { table, relay: pgBossRelay({ boss: boss.raw, queue }) } },
    });
    await producer.migrate();
    const ids = (await fixture.transaction((tx) => producer.publishMany(tx, published))).map(String);
    expect((await producer.drain('orders')).pending).toBe(0);
    await producer.close();
    return { queue, ids };
  }

  /** Every job of `queue` completed. */
  const completed = async (queue: string, ids: readonly string[]) => {
    const states = await Promise.all(ids.map((id) => boss.getJob(queue, jobIdOf(id))));
    return states.every((job) => (job as { state?: string } | null)?.state === 'completed');
  };

  test('a batch is completed after its commits only; a failed one is retried, with no second effect', async () => {
    const { queue, ids } = await relayed(`pgboss_${name.replace(/\W/g, '')}`);

    const failing = ids[2]!; // the third job of the batch: the two before it commit, then it fails
    let failedOnce = false;
    const runs: Array<Array<{ id: string; duplicate: boolean }> | 'failed'> = [];
    const receive = pgBossReceiver({
      outboxer: consumer.outboxer,
      inbox: 'pgboss',
      transaction: runner.transaction,
      handler: async (message, tx) => {
        await recordEffect(tx, message.id, message.groupKey, message.payload);
        if (message.id === failing && !failedOnce) {
          failedOnce = true;
          runner.failCommit = true;
        }
      },
    });
    // Every job is fetched at once, as one batch, so that the failure fails the jobs around it too.
    const worker = boss.raw as unknown as Worker;
    await worker.work(queue, { batchSize: 10, pollingIntervalSeconds: 0.5 }, async (jobs) => {
      try {
        const outcomes = await receive(jobs);
        runs.push(outcomes.map((o: ReceiveOutcome) => ({ id: o.id, duplicate: o.duplicate })));
        return outcomes;
      } catch (error) {
        runs.push('failed');
        throw error;
      }
    });
    await waitUntil(() => completed(queue, ids), 30_000, 'every job completed');
    await worker.offWork(queue);

    expect(runs[0]).toEqual('failed');
    const handled = runs.slice(1).flat() as Array<{ id: string; duplicate: boolean }>;
    expect(handled.map((o) => o.id).sort()).toEqual([...ids].sort());
    // The two jobs that committed before the failure came back with the retried batch: duplicates.
    expect(
      handled
        .filter((o) => o.duplicate)
        .map((o) => o.id)
        .sort(),
    ).toEqual([ids[0], ids[1]].sort());
    expect((await effects(fixture)).map((r) => r.message_id).sort()).toEqual([...ids].sort());
    expect((await boss.getJob(queue, jobIdOf(failing)))?.retryCount).toBe(1); // failed once, then completed
  });

  test('store: true completes a batch once stored; the inbox processes each job once', async () => {
    const suffix = name.replace(/\W/g, '');
    const { queue, ids } = await relayed(`pgboss_stored_${suffix}`);
    const inbox = `pgbossStored_${suffix}`;
    const stored = await storingConsumerOf(fixture, runner, inbox);
    runner.failCommit = true; // the first store's commit fails: its batch is failed and retried
    const receive = pgBossReceiver({ outboxer: stored, inbox, transaction: runner.transaction, store: true });
    const failures: string[] = [];
    const worker = boss.raw as unknown as Worker;
    await worker.work(queue, { batchSize: 10, pollingIntervalSeconds: 0.5 }, (jobs) =>
      receive(jobs).catch((error: unknown) => {
        failures.push(String(error));
        throw error;
      }),
    );
    await waitUntil(() => completed(queue, ids), 30_000, 'every job completed');
    await worker.offWork(queue);
    expect(failures).toEqual(['Error: the commit failed']);
    // pg-boss keeps no order across a retry: the inbox processes in the order it stored.
    await expectStoredThenProcessed(fixture, stored, inbox, ids, published, false);
  });
});
