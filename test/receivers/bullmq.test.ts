/**
 * The BullMQ receiver against the real Redis (127.0.0.1:6379, a random prefix), with Postgres
 * behind it: our BullMQ relay adds the jobs, a worker runs them through the receiver. A job whose
 * commit fails is not completed (BullMQ retries it) and is handled at its next attempt; jobs the
 * relay adds again after the first ones were completed and removed (a redelivery) have no second
 * effect; with `store: true`, a job is completed once stored and the inbox processes it later. No
 * order is checked: BullMQ runs a retried job after those added behind it, whatever the
 * concurrency (docs/inbox.md says so).
 */
import { randomBytes } from 'node:crypto';
import { Queue, Worker, type Job } from 'bullmq';
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { Outboxer } from 'outboxer';
import { bullmqReceiver, bullmqRelay, type BullmqQueueLike } from 'outboxer/bullmq';
import { nodePostgres } from 'outboxer/pg';
import { postgresFixture } from '../support/databases.js';
import { waitUntil } from '../support/random.js';
import {
  clear,
  consumerOf,
  effects,
  pgRunner,
  recordEffect,
  type PostgresFixture,
  orderSteps,
  expectStoredThenProcessed,
  storingConsumerOf,
} from './support.js';

const connection = { host: '127.0.0.1', port: 6379 };
const prefix = `outboxer-receiver-${randomBytes(4).toString('hex')}`;

let fixture: PostgresFixture;
let consumer: Awaited<ReturnType<typeof consumerOf>>;
let runner: ReturnType<typeof pgRunner>;
const closing: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  fixture = await postgresFixture();
  consumer = await consumerOf(fixture, 'bullmq');
});
afterAll(async () => {
  for (const close of closing.reverse()) await close();
  await consumer.outboxer.close();
  await fixture.close();
});
beforeEach(async () => {
  await clear(fixture);
  runner = pgRunner(fixture.pool);
});

const published = orderSteps(6, 2);

/**
 * A queue filled by the relay with `published`, through the outbox in `table`; what the relay
 * added is kept, to add it again as a redelivery of the same batch does.
 */
async function relayed(table: string) {
  const name = `orders-${randomBytes(4).toString('hex')}`;
  const queue = new Queue(name, { connection, prefix });
  closing.push(() => queue.obliterate({ force: true }).then(() => queue.close()));
  const added: Array<Parameters<BullmqQueueLike['addBulk']>[0][number]> = [];
  const recording: BullmqQueueLike = {
    name,
    addBulk: (jobs) => (added.push(...jobs), queue.addBulk(jobs as never)),
  };
  const producer = new Outboxer({
    database: nodePostgres(fixture.pool),
    testing: 'manual',
    logger: false,
    outboxes: {
      orders: {
        table,
        relay: bullmqRelay({ queue: recording, jobOptions: { attempts: 5, removeOnComplete: true } }),
      },
    },
  });
  await producer.migrate();
  const ids = (await fixture.transaction((tx) => producer.publishMany(tx, published))).map(String);
  expect((await producer.drain('orders')).pending).toBe(0);
  await producer.close();
  return { name, ids, added, queue };
}

test('a job is completed after its commit only; a redelivered job has no second effect', async () => {
  const { name, ids, added, queue } = await relayed('bullmq_outbox');

  const failing = ids[2]!;
  let failedOnce = false;
  const committed = new Set<string>();
  const events: string[] = [];
  const handling = new WeakMap<object, string>();
  const worker = new Worker(
    name,
    bullmqReceiver({
      outboxer: consumer.outboxer,
      inbox: 'bullmq',
      transaction: async (work) => {
        let client: object | undefined;
        // A pooled client keeps no label of its last transaction.
        const result = await runner.transaction((tx) => (handling.delete(tx), work((client = tx))));
        if (handling.has(client!)) {
          committed.add(handling.get(client!)!);
          events.push(`commit ${handling.get(client!)}`);
        }
        return result;
      },
      handler: async (message, tx) => {
        handling.set(tx, message.id);
        await recordEffect(tx, message.id, message.groupKey, message.payload);
        if (message.id === failing && !failedOnce) {
          failedOnce = true;
          runner.failCommit = true;
        }
      },
    }),
    { connection, prefix, concurrency: 1 },
  );
  closing.push(() => worker.close());
  const outcomes: Array<{ id: string; duplicate: boolean }> = [];
  worker.on('completed', (job: Job, value: { id: string; duplicate: boolean }) => {
    events.push(`complete ${value.id}`);
    outcomes.push({ id: value.id, duplicate: value.duplicate });
  });
  worker.on(
    'failed',
    (job) =>
      void events.push(
        `fail ${String((job?.data as { headers: Record<string, string> }).headers['outboxer-id'])}`,
      ),
  );

  await waitUntil(() => outcomes.length === ids.length, 30_000, 'every job completed');
  const rows = await effects(fixture);
  expect(rows.map((r) => r.message_id).sort()).toEqual([...ids].sort());
  expect(rows.find((r) => r.message_id === ids[0])!.payload).toEqual({ n: 0 });
  for (const id of ids) {
    const mine = events.filter((e) => e.endsWith(` ${id}`));
    expect(mine.indexOf(`complete ${id}`), id).toBeGreaterThan(mine.indexOf(`commit ${id}`));
  }
  expect(events.filter((e) => e.endsWith(` ${failing}`))).toEqual([
    `fail ${failing}`,
    `commit ${failing}`,
    `complete ${failing}`,
  ]);

  // The relay sends the batch again (its acknowledgement was lost): the same jobs, same ids, added
  // again now that the first ones were removed on completion.
  outcomes.length = 0;
  await queue.addBulk(added as never);
  await waitUntil(() => outcomes.length === ids.length, 30_000, 'every job run again');
  expect(outcomes.every((o) => o.duplicate)).toBe(true);
  expect((await effects(fixture)).map((r) => r.message_id)).toEqual(rows.map((r) => r.message_id));
});

test('store: true completes each job once stored; the inbox processes each once', async () => {
  const { name, ids } = await relayed('bullmq_stored');
  const stored = await storingConsumerOf(fixture, runner, 'bullmqStored');
  runner.failCommit = true; // the first store's commit fails: that job fails, stored at its retry
  const outcomes: string[] = [];
  const failures: string[] = [];
  const worker = new Worker(
    name,
    bullmqReceiver({ outboxer: stored, inbox: 'bullmqStored', transaction: runner.transaction, store: true }),
    { connection, prefix, concurrency: 1 },
  );
  closing.push(() => worker.close());
  worker.on('completed', (job: Job, value: { id: string }) => void outcomes.push(value.id));
  worker.on('failed', (job, error) => void failures.push(String(error)));
  await waitUntil(() => outcomes.length === ids.length, 30_000, 'every job completed');
  await worker.close();
  expect(failures).toEqual(['Error: the commit failed']);
  // BullMQ runs the retried job after those added behind it: stored, and so processed, out of group order.
  await expectStoredThenProcessed(fixture, stored, 'bullmqStored', ids, published, false);
});
