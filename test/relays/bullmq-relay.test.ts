import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { OutboxerError, PermanentError, SKIPPED, isOutboxerError, type Envelope } from 'outboxer';
import { bullmqRelay, defaultJobId, type BullmqJobData, type BullmqQueueLike } from 'outboxer/bullmq';
import { deliverBatch, makeContext, makeEnvelope } from '../support/envelopes.js';
import { invalidOptions } from './contract.js';
import { closedPort } from '../support/tcp-proxy.js';

// Focused tests of outboxer/bullmq against the Redis on 127.0.0.1:6379 (keys under a random prefix).
const REDIS = { host: '127.0.0.1', port: 6379 };
const prefix = `outboxer-test-${randomBytes(4).toString('hex')}`;
/** Queues to remove at the end; `reachable: false` for those that cannot reach Redis (obliterate would wait forever). */
const queues: Array<{ queue: Queue; reachable: boolean }> = [];
let redis: Redis;

beforeAll(() => {
  redis = new Redis(REDIS);
});
afterAll(async () => {
  for (const { queue, reachable } of queues) {
    if (reachable) await queue.obliterate({ force: true });
    await queue.close();
  }
  // Whatever obliterate leaves (the meta of queues that never got a job, keys planted by a test).
  const leftovers = [];
  for await (const keys of redis.scanStream({ match: `${prefix}:*`, count: 1000 }))
    leftovers.push(...(keys as string[]));
  if (leftovers.length > 0) await redis.del(...leftovers);
  await redis.quit();
});

function newQueue(
  options: {
    connection?: Record<string, unknown>;
    defaultJobOptions?: Record<string, unknown>;
    reachable?: boolean;
  } = {},
): Queue {
  const queue = new Queue(`q-${randomBytes(4).toString('hex')}`, {
    connection: { ...REDIS, ...options.connection },
    prefix,
    defaultJobOptions: options.defaultJobOptions,
  });
  queue.on('error', () => undefined);
  queues.push({ queue, reachable: options.reachable ?? true });
  return queue;
}

const envelope = (overrides: Partial<Envelope> = {}) =>
  makeEnvelope({ groupKey: 'g1', payload: { n: 1 }, ...overrides });

describe('bullmqRelay options', () => {
  const queue = { name: 'q', addBulk: async () => [] } satisfies BullmqQueueLike;

  test.each([
    [undefined, /bullmqRelay\(options\)/],
    [{}, /bullmqRelay\.queue.*addBulk/],
    [{ queue: { name: 'q' } }, /bullmqRelay\.queue/],
    [{ queue, topic: 'x' }, /Unknown option "bullmqRelay\.topic"/],
    [{ queue, jobId: 'fixed' }, /bullmqRelay\.jobId.*function/],
    [{ queue, jobName: 1 }, /bullmqRelay\.jobName/],
    [{ queue, jobData: {} }, /bullmqRelay\.jobData/],
    [{ queue, jobOptions: { jobId: 'x' } }, /bullmqRelay\.jobOptions.*without jobId/],
    [{ queue, jobOptions: { deduplication: { id: 'x' } } }, /without deduplication/],
    [{ queue, jobOptions: { repeat: { every: 1000 } } }, /without repeat/],
    [{ queue, jobOptions: [] }, /bullmqRelay\.jobOptions/],
    [{ queue, timeout: 0 }, /bullmqRelay\.timeout.*integer from 1/],
    [{ queue, strictOrder: 'yes' }, /bullmqRelay\.strictOrder.*true or false/],
    [{ queue, name: '' }, /bullmqRelay\.name/],
  ])('rejects %j', (options, message) => {
    expect(invalidOptions(() => bullmqRelay(options as never))).toMatch(message);
  });

  test('the default job id is outboxer-<outbox>-<id>, which BullMQ accepts', () => {
    expect(defaultJobId({ outbox: 'orders.v2', id: 42 })).toBe('outboxer-orders.v2-42');
  });
});

describe('bullmqRelay against Redis', () => {
  test('adds one job per message: id from the outbox id, name from the type, data { payload, headers }', async () => {
    const queue = newQueue();
    const relay = bullmqRelay({ queue, jobOptions: { attempts: 3 } });
    const typed = envelope({
      type: 'OrderPaid',
      payload: { orderId: 7 },
      headers: { 'trace-id': 'abc' },
      groupKey: 'order:7',
    });
    const untyped = envelope({ groupKey: null, payload: [1, 2] });
    expect(await deliverBatch(relay, [typed, untyped])).toEqual([{ ok: true }, { ok: true }]);

    const first = (await queue.getJob(`outboxer-events-${typed.id}`))!;
    expect(first.name).toBe('OrderPaid');
    expect(first.opts.attempts).toBe(3);
    expect(first.data).toEqual({
      payload: { orderId: 7 },
      headers: {
        'trace-id': 'abc',
        'outboxer-id': String(typed.id),
        'outboxer-outbox': 'events',
        'outboxer-type': 'OrderPaid',
        'outboxer-group-key': 'order:7',
      },
    });
    const second = (await queue.getJob(`outboxer-events-${untyped.id}`))!;
    expect(second.name).toBe('events');
    expect(second.data).toEqual({
      payload: [1, 2],
      headers: { 'outboxer-id': String(untyped.id), 'outboxer-outbox': 'events' },
    });
    expect(await queue.getJobCountByTypes('wait')).toBe(2);
  });

  test('a redelivered message is ignored while its job exists', async () => {
    const queue = newQueue();
    const relay = bullmqRelay({ queue });
    const batch = [envelope({ payload: { v: 1 } }), envelope({ payload: { v: 1 } })];
    await deliverBatch(relay, batch);
    const again = batch.map((m) => ({ ...m, payload: { v: 2 } }));
    expect(await deliverBatch(relay, again)).toEqual([{ ok: true }, { ok: true }]);
    expect(await queue.getJobCountByTypes('wait')).toBe(2);
    expect(((await queue.getJob(`outboxer-events-${batch[0]!.id}`))!.data as BullmqJobData).payload).toEqual({
      v: 1,
    });
  });

  test('removeOnComplete ends deduplication: a message redelivered after its job was removed runs again', async () => {
    const queue = newQueue({ defaultJobOptions: { removeOnComplete: true } });
    const relay = bullmqRelay({ queue });
    const message = envelope();
    const runs: string[] = [];
    const worker = new Worker(queue.name, async (job) => void runs.push(job.id!), {
      connection: REDIS,
      prefix,
      concurrency: 1,
    });
    try {
      await deliverBatch(relay, [message]);
      await expect.poll(() => runs.length).toBe(1);
      await expect.poll(async () => queue.getJob(`outboxer-events-${message.id}`)).toBeUndefined();
      await deliverBatch(relay, [message]);
      await expect.poll(() => runs.length).toBe(2);
    } finally {
      await worker.close();
    }
  });

  test('a custom job id BullMQ would refuse fails its message (misconfiguration) and holds back its group only', async () => {
    const queue = newQueue();
    const relay = bullmqRelay({ queue, jobId: (m) => (m.id === bad.id ? `order:${m.id}` : `order-${m.id}`) });
    const before = envelope({ groupKey: 'a' });
    const bad = envelope({ groupKey: 'a' });
    const after = envelope({ groupKey: 'a' });
    const other = envelope({ groupKey: 'b' });
    const outcomes = await deliverBatch(relay, [before, bad, after, other]);
    expect(outcomes[0]).toEqual({ ok: true });
    expect(outcomes[1]!.ok).toBe(false);
    const error = (outcomes[1] as { error: OutboxerError }).error;
    expect(error.code).toBe('RELAY_MISCONFIGURED');
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(/must not|without ":"/);
    expect(outcomes[2]).toEqual({ ok: false, error: SKIPPED });
    expect(outcomes[3]).toEqual({ ok: true });
    expect((await queue.getJobs(['wait'])).map((job) => job.id).sort()).toEqual(
      [`order-${before.id}`, `order-${other.id}`].sort(),
    );
  });

  test('a job BullMQ refuses for good is a PermanentError; the rest of its group waits, other groups go on', async () => {
    const queue = newQueue();
    // BullMQ checks sizeLimit before it sends anything: the whole addBulk call fails, and the
    // relay sends the jobs one by one to find the culprit.
    const relay = bullmqRelay({ queue, jobOptions: { sizeLimit: 200 } });
    const small = envelope({ groupKey: 'a' });
    const large = envelope({ groupKey: 'a', payload: { text: 'x'.repeat(500) } });
    const behind = envelope({ groupKey: 'a' });
    const other = envelope({ groupKey: 'b' });
    const ungrouped = envelope({ groupKey: null });
    const outcomes = await deliverBatch(relay, [small, large, behind, other, ungrouped]);
    expect(outcomes.map((o) => o.ok)).toEqual([true, false, false, true, true]);
    expect((outcomes[1] as { error: unknown }).error).toBeInstanceOf(PermanentError);
    expect(String((outcomes[1] as { error: Error }).error.message)).toMatch(/exceeds the limit/);
    expect(outcomes[2]).toEqual({ ok: false, error: SKIPPED });
    expect((await queue.getJobs(['wait'])).map((job) => job.id).sort()).toEqual(
      [small, other, ungrouped].map((m) => `outboxer-events-${m.id}`).sort(),
    );
  });

  test('addBulk is not atomic in BullMQ 6: with strictOrder: false, a job Redis refuses does not stop the jobs of its group after it (documented gap)', async () => {
    const queue = newQueue();
    const relay = bullmqRelay({ queue, strictOrder: false });
    const [first, refused, behind, other] = [
      envelope({ groupKey: 'a' }),
      envelope({ groupKey: 'a' }),
      envelope({ groupKey: 'a' }),
      envelope({ groupKey: 'b' }),
    ];
    // A plain string where the job hash belongs: Redis answers WRONGTYPE for this job alone.
    await redis.set(`${prefix}:${queue.name}:outboxer-events-${refused!.id}`, 'not a job');
    const outcomes = await deliverBatch(relay, [first!, refused!, behind!, other!]);
    expect(outcomes[0]).toEqual({ ok: true });
    expect(outcomes[1]!.ok).toBe(false);
    expect((outcomes[1] as { error: PermanentError }).error.permanent).toBe(false); // Redis' refusal is retried
    expect(String((outcomes[1] as { error: Error }).error.message)).toMatch(/WRONGTYPE/);
    expect(outcomes[2]).toEqual({ ok: false, error: SKIPPED });
    expect(outcomes[3]).toEqual({ ok: true });
    // The pipelined addBulk did add the job behind the refused one: BullMQ now holds it ahead of
    // its predecessor. The relay reports it as not delivered, and its redelivery is a no-op.
    expect(await queue.getJob(`outboxer-events-${behind!.id}`)).toBeDefined();
  });

  test('with strictOrder (the default), a job Redis refuses never lets a later job of its group into the queue; the retry adds them in order', async () => {
    const queue = newQueue();
    const calls: string[][] = [];
    const counting: BullmqQueueLike = {
      name: queue.name,
      addBulk: (jobs) => (calls.push(jobs.map((job) => String(job.opts?.jobId))), queue.addBulk(jobs)),
      on: (e, l) => queue.on(e, l),
      off: (e, l) => queue.off(e, l),
    };
    const relay = bullmqRelay({ queue: counting });
    const [first, refused, behind, other] = [
      envelope({ groupKey: 'a' }),
      envelope({ groupKey: 'a' }),
      envelope({ groupKey: 'a' }),
      envelope({ groupKey: 'b' }),
    ];
    const jobId = (m: Envelope) => `outboxer-events-${m.id}`;
    // A plain string where the job hash belongs: Redis answers WRONGTYPE for this job alone.
    const planted = `${prefix}:${queue.name}:${jobId(refused!)}`;
    await redis.set(planted, 'not a job');
    const outcomes = await deliverBatch(relay, [first!, refused!, behind!, other!]);
    expect(outcomes[0]).toEqual({ ok: true });
    expect(outcomes[1]!.ok).toBe(false);
    expect((outcomes[1] as { error: PermanentError }).error.permanent).toBe(false); // Redis' refusal is retried
    expect(String((outcomes[1] as { error: Error }).error.message)).toMatch(/WRONGTYPE/);
    expect(outcomes[2]).toEqual({ ok: false, error: SKIPPED });
    expect(outcomes[3]).toEqual({ ok: true });
    // One job per group per call: the refused job went alone, and the one behind it was never sent.
    expect(calls).toEqual([[jobId(first!), jobId(other!)], [jobId(refused!)]]);
    expect(await queue.getJob(jobId(behind!))).toBeUndefined();

    // Once Redis takes it, the retry adds the refused job, then the one behind it.
    await redis.del(planted);
    expect(await deliverBatch(relay, [refused!, behind!])).toEqual([{ ok: true }, { ok: true }]);
    const waiting = await queue.getJobs(['wait'], 0, -1, true);
    expect(
      waiting.filter((job) => job.data.headers['outboxer-group-key'] === 'a').map((job) => job.id),
    ).toEqual([first!, refused!, behind!].map(jobId));
  });

  test('a Redis that does not answer fails the whole batch once the timeout passes, naming the last connection error', async () => {
    const queue = newQueue({ connection: { port: await closedPort() }, reachable: false });
    let calls = 0;
    const counting: BullmqQueueLike = {
      name: queue.name,
      addBulk: (jobs) => (calls++, queue.addBulk(jobs)),
      on: (e, l) => queue.on(e, l),
      off: (e, l) => queue.off(e, l),
    };
    const relay = bullmqRelay({ queue: counting, timeout: 300 });
    await relay.start!();
    try {
      const outcomes = await deliverBatch(relay, [envelope({ groupKey: 'a' }), envelope({ groupKey: 'b' })]);
      expect(calls).toBe(1); // no one-by-one retry: the failure is not about particular jobs
      for (const outcome of outcomes) {
        expect(outcome.ok).toBe(false);
        expect(String((outcome as { error: Error }).error.message)).toMatch(
          /did not finish within 300 ms.*ECONNREFUSED/,
        );
      }
    } finally {
      await relay.stop!();
    }
  });

  test('an aborted delivery sends nothing', async () => {
    const queue = newQueue();
    const relay = bullmqRelay({ queue });
    const controller = new AbortController();
    controller.abort(new Error('outboxer is stopping'));
    const outcomes = await deliverBatch(
      relay,
      [envelope(), envelope()],
      makeContext({ signal: controller.signal }),
    );
    expect(outcomes.every((o) => !o.ok)).toBe(true);
    expect(await queue.getJobCountByTypes('wait')).toBe(0);
  });

  test.each([
    ['an unknown Redis user', { username: 'outboxer-nobody', password: 'wrong' }, /WRONGPASS/],
    ['a database Redis does not have', { db: 999 }, /DB index is out of range/],
  ])('start() fails with RELAY_MISCONFIGURED for %s', async (_, connection, message) => {
    const queue = newQueue({ connection, reachable: false });
    const relay = bullmqRelay({ queue, timeout: 3000 });
    const listeners = queue.listenerCount('error');
    const error = await relay.start!().then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(queue.listenerCount('error')).toBe(listeners); // a failed start() leaves nothing behind
    expect(isOutboxerError(error) && error.code).toBe('RELAY_MISCONFIGURED');
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).toMatch(/connection options/);
  });

  test('start() does not fail while Redis is unreachable: that is an outage, messages wait', async () => {
    const queue = newQueue({ connection: { port: await closedPort() }, reachable: false });
    const relay = bullmqRelay({ queue, timeout: 200 });
    await expect(relay.start!()).resolves.toBeUndefined();
    await relay.stop!();
  });

  test('stop() removes the error listener start() added', async () => {
    const queue = newQueue();
    const before = queue.listenerCount('error');
    const relay = bullmqRelay({ queue });
    await relay.start!();
    expect(queue.listenerCount('error')).toBe(before + 1);
    await relay.stop!();
    expect(queue.listenerCount('error')).toBe(before);
  });
});
