/**
 * The pg-boss receiver against real Postgres (pg-boss in a schema of its own), with the inbox in
 * the same server: our pg-boss relay inserts the jobs, `boss.work` runs them in batches through
 * the receiver. A batch with a commit that fails is failed and retried by pg-boss, none of it
 * completed before its commits; the jobs of that batch that had committed come back as duplicates
 * and have no second effect. No order is checked: pg-boss keeps none across a retry.
 */
import { randomBytes } from 'node:crypto';
import PgBoss from 'pg-boss';
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { Outboxer, type ReceiveOutcome } from 'outboxer';
import { pgBossJobId, pgBossReceiver, pgBossRelay } from 'outboxer/pg-boss';
import { nodePostgres } from 'outboxer/pg';
import { DATABASE_URL, postgresFixture } from '../support/databases.js';
import { waitUntil } from '../support/random.js';
import {
  clear,
  consumerOf,
  effects,
  pgRunner,
  recordEffect,
  type PostgresFixture,
  orderSteps,
} from './support.js';

const schema = `pgboss_receiver_${randomBytes(4).toString('hex')}`;

let fixture: PostgresFixture;
let consumer: Awaited<ReturnType<typeof consumerOf>>;
let runner: ReturnType<typeof pgRunner>;
let boss: PgBoss;

beforeAll(async () => {
  fixture = await postgresFixture();
  consumer = await consumerOf(fixture, 'pgboss');
  boss = new PgBoss({ connectionString: DATABASE_URL, schema, supervise: false, schedule: false, max: 3 });
  boss.on('error', () => undefined);
  await boss.start();
});
afterAll(async () => {
  await boss.stop({ graceful: false });
  await fixture.pool.query(`DROP SCHEMA ${schema} CASCADE`);
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

test('a batch is completed after its commits only; a failed one is retried, with no second effect', async () => {
  const queue = `orders_${randomBytes(4).toString('hex')}`;
  await boss.createQueue(queue, { name: queue, retryLimit: 3, retryDelay: 0 });
  const producer = new Outboxer({
    database: nodePostgres(fixture.pool),
    testing: 'manual',
    logger: false,
    outboxes: { orders: { table: 'pgboss_outbox', relay: pgBossRelay({ boss, queue }) } },
  });
  await producer.migrate();
  const ids = (await fixture.transaction((tx) => producer.publishMany(tx, published))).map(String);
  expect((await producer.drain('orders')).pending).toBe(0);
  await producer.close();

  const failing = ids[2]!; // the third job of the batch: the two before it commit, then it fails
  let failedOnce = false;
  const runs: Array<Array<{ id: string; duplicate: boolean } | 'failed'>> = [];
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
  await boss.work(queue, { batchSize: 10, pollingIntervalSeconds: 0.5 }, async (jobs) => {
    try {
      const outcomes = await receive(jobs);
      runs.push(outcomes.map((o: ReceiveOutcome) => ({ id: o.id, duplicate: o.duplicate })));
      return outcomes;
    } catch (error) {
      runs.push(['failed']);
      throw error;
    }
  });
  await waitUntil(
    async () => {
      const states = await Promise.all(
        ids.map(async (id) => (await boss.getJobById(queue, jobIdOf(id)))?.state),
      );
      return states.every((state) => state === 'completed');
    },
    30_000,
    'every job completed',
  );
  await boss.offWork(queue);

  expect(runs[0]).toEqual(['failed']);
  const handled = runs.slice(1).flat() as Array<{ id: string; duplicate: boolean }>;
  expect(handled.map((o) => o.id).sort()).toEqual([...ids].sort());
  // The two jobs that committed before the failure came back with the retried batch: duplicates.
  expect(
    handled
      .filter((o) => o.duplicate)
      .map((o) => o.id)
      .sort(),
  ).toEqual([ids[0], ids[1]].sort());
  const rows = await effects(fixture);
  expect(rows.map((r) => r.message_id).sort()).toEqual([...ids].sort());
  const job = await boss.getJobById(queue, jobIdOf(failing));
  expect(job?.retryCount).toBe(1); // failed once, not completed, then completed
});
