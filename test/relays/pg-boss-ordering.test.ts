import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PgBoss, type Job, type WorkOptions } from 'pg-boss';
import { SKIPPED, type Envelope, type OutboxerError } from 'outboxer';
import { pgBossJobId, pgBossRelay, type PgBossJobData } from 'outboxer/pg-boss';
import { deliverBatch, makeContext, makeEnvelope } from '../support/envelopes.js';
import { seededRandom, waitUntil } from '../support/random.js';
import { DATABASE_URL } from './pg-boss-lines.js';

// pg-boss 12: which of its features keep a group's jobs in order once more than one worker runs
// them, against the Postgres on 127.0.0.1:5432 (pg-boss installed in a random schema, dropped at
// the end). A `key_strict_fifo` queue, with the group key as every job's singletonKey (the relay
// sets it), does; a job `group` with the workers' `groupConcurrency: 1` does not.

const schema = `pgboss_${randomBytes(4).toString('hex')}`;
let boss: PgBoss;
let pool: pg.Pool;

function newBoss(max = 3): PgBoss {
  const instance = new PgBoss({
    connectionString: DATABASE_URL,
    schema,
    supervise: false,
    schedule: false,
    migrate: false,
    max,
  });
  instance.on('error', () => undefined);
  return instance;
}

beforeAll(async () => {
  const installer = new PgBoss({
    connectionString: DATABASE_URL,
    schema,
    supervise: false,
    schedule: false,
    max: 1,
  });
  installer.on('error', () => undefined);
  await installer.start();
  await installer.stop({ graceful: false });
  boss = newBoss();
  await boss.start();
  pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
});
afterAll(async () => {
  await pool.query(`DROP SCHEMA ${schema} CASCADE`);
  await pool.end();
  await boss.stop({ graceful: false });
});

async function newQueue(options: { policy?: 'standard' | 'key_strict_fifo'; retryLimit?: number } = {}) {
  const name = `q_${randomBytes(4).toString('hex')}`;
  await boss.createQueue(name, options);
  return name;
}

type Data = PgBossJobData<{ n: number }>;
const idOf = (job: Job<Data>) => Number(job.data.headers['outboxer-id']);
const envelope = (overrides: Partial<Envelope> = {}) => makeEnvelope({ groupKey: 'a', ...overrides });

/** Runs `work` inside a transaction that stays open until `work`'s promise settles, then commits. */
async function inOpenTransaction<T>(
  work: (db: { executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> }) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work({ executeSql: (text, values) => client.query(text, values) });
    await client.query('COMMIT');
    return result;
  } finally {
    client.release();
  }
}

describe('two workers fetching at the same moment', () => {
  test('group + groupConcurrency 1: the second takes the next job of the group while the first one claims its head', async () => {
    const queue = await newQueue();
    const [first, second] = [envelope(), envelope()];
    await deliverBatch(pgBossRelay({ boss, queue }), [first, second]);
    const claimed = await inOpenTransaction(async (db) => {
      const [head] = await boss.fetch<Data>(queue, { groupConcurrency: 1, db });
      // The head's claim is not committed: the other worker's "no active job in the group" probe
      // does not see it, and SKIP LOCKED passes over the head to the next job.
      const [next] = await boss.fetch<Data>(queue, { groupConcurrency: 1 });
      return [head, next];
    });
    expect(claimed.map((job) => job && idOf(job)).sort()).toEqual([first.id, second.id]);
  });

  test('key_strict_fifo: the second gets nothing of that key, and the next job only once the head is complete', async () => {
    const queue = await newQueue({ policy: 'key_strict_fifo' });
    const [first, second, other] = [envelope(), envelope(), envelope({ groupKey: 'b' })];
    await deliverBatch(pgBossRelay({ boss, queue }), [first, second, other]);
    const claimed = await inOpenTransaction(async (db) => {
      const [head] = await boss.fetch<Data>(queue, { db });
      const meanwhile = await boss.fetch<Data>(queue, { batchSize: 10 });
      return { head: head!, meanwhile: meanwhile.map(idOf) };
    });
    expect(idOf(claimed.head)).toBe(first.id);
    expect(claimed.meanwhile).toEqual([other.id]); // key b goes on
    expect(await boss.fetch(queue, { batchSize: 10 })).toEqual([]); // the head is active
    await boss.complete(queue, claimed.head.id);
    expect((await boss.fetch<Data>(queue, { batchSize: 10 })).map(idOf)).toEqual([second.id]);
  });
});

describe('a job that failed and waits for its retry', () => {
  test('group + groupConcurrency 1: the next job of the group overtakes it', async () => {
    const queue = await newQueue();
    const [first, second] = [envelope(), envelope()];
    await deliverBatch(pgBossRelay({ boss, queue, jobOptions: { retryLimit: 1, retryDelay: 600 } }), [
      first,
      second,
    ]);
    const [head] = await boss.fetch<Data>(queue, { groupConcurrency: 1 });
    await boss.fail(queue, head!.id);
    expect((await boss.fetch<Data>(queue, { groupConcurrency: 1 })).map(idOf)).toEqual([second.id]);
  });

  test('key_strict_fifo: nothing behind it runs until its retry succeeded; other keys go on', async () => {
    const queue = await newQueue({ policy: 'key_strict_fifo' });
    const [first, second, other] = [envelope(), envelope(), envelope({ groupKey: 'b' })];
    await deliverBatch(pgBossRelay({ boss, queue, jobOptions: { retryLimit: 1, retryDelay: 600 } }), [
      first,
      second,
      other,
    ]);
    const [head] = await boss.fetch<Data>(queue);
    expect(idOf(head!)).toBe(first.id);
    await boss.fail(queue, head!.id);
    expect((await boss.fetch<Data>(queue, { batchSize: 10 })).map(idOf)).toEqual([other.id]);
    // The retry is due in 10 minutes; fetch it now, as its time had come.
    const [retried] = await boss.fetch<Data>(queue, { ignoreStartAfter: true });
    expect([idOf(retried!), retried!.retryCount]).toEqual([first.id, 1]);
    await boss.complete(queue, retried!.id);
    expect((await boss.fetch<Data>(queue)).map(idOf)).toEqual([second.id]);
  });

  test('key_strict_fifo: once its retries are used up it stays failed and holds its key until retried', async () => {
    const queue = await newQueue({ policy: 'key_strict_fifo', retryLimit: 0 });
    const [first, second] = [envelope({ groupKey: 'order:1' }), envelope({ groupKey: 'order:1' })];
    await deliverBatch(pgBossRelay({ boss, queue }), [first, second]);
    const [head] = await boss.fetch<Data>(queue);
    await boss.fail(queue, head!.id);
    expect(await boss.fetch(queue)).toEqual([]);
    expect(await boss.getBlockedKeys(queue)).toEqual(['order:1']);
    await boss.retry(queue, head!.id);
    const [again] = await boss.fetch<Data>(queue);
    expect(idOf(again!)).toBe(first.id);
    await boss.complete(queue, again!.id);
    expect((await boss.fetch<Data>(queue)).map(idOf)).toEqual([second.id]);
  });
});

describe('what the relay sets on pg-boss 12', () => {
  async function jobOf(queue: string, message: Envelope) {
    return (await boss.findJobs<Data>(queue, { id: pgBossJobId(message) }))[0]!;
  }

  test('the job group: the group key by default, mapped, or none', async () => {
    const queue = await newQueue();
    const [grouped, ungrouped] = [envelope({ groupKey: 'tenant-1:order-7' }), envelope({ groupKey: null })];
    await deliverBatch(pgBossRelay({ boss, queue }), [grouped, ungrouped]);
    expect((await jobOf(queue, grouped)).groupId).toBe('tenant-1:order-7');
    expect((await jobOf(queue, ungrouped)).groupId).toBeNull();

    const mapped = await newQueue();
    const byTenant = pgBossRelay({
      boss,
      queue: mapped,
      group: (m) => ({ id: m.groupKey!.split(':')[0]!, tier: 'gold' }),
    });
    await deliverBatch(byTenant, [grouped]);
    expect(await jobOf(mapped, grouped)).toMatchObject({ groupId: 'tenant-1', groupTier: 'gold' });

    const none = await newQueue();
    await deliverBatch(pgBossRelay({ boss, queue: none, group: false }), [grouped]);
    expect((await jobOf(none, grouped)).groupId).toBeNull();
  });

  test('a group function returning something pg-boss refuses fails that message and holds back its group only', async () => {
    const queue = await newQueue();
    const relay = pgBossRelay({ boss, queue, group: (m) => (m.type === 'bad' ? '' : m.groupKey) });
    const outcomes = await deliverBatch(relay, [
      envelope({ type: 'bad' }),
      envelope(),
      envelope({ groupKey: 'b' }),
    ]);
    const error = (outcomes[0] as { error: OutboxerError }).error;
    expect([error.code, error.retryable]).toEqual(['RELAY_MISCONFIGURED', true]);
    expect(error.message).toMatch(/pgBossRelay\.group returned ""/);
    expect(outcomes.slice(1)).toEqual([{ ok: false, error: SKIPPED }, { ok: true }]);
  });

  test.each([
    ['group', 'a', 'a'],
    ['group', null, 'the job id'],
    ['total', 'a', 'the outbox name'],
    ['none', 'a', 'the job id'],
  ] as const)(
    'the singletonKey on a key_strict_fifo queue, ordering %s, group key %s: %s',
    async (ordering, groupKey, expected) => {
      const queue = await newQueue({ policy: 'key_strict_fifo' });
      const message = envelope({ groupKey, outbox: 'orders' });
      await deliverBatch(pgBossRelay({ boss, queue }), [message], makeContext({ ordering }));
      const key =
        expected === 'the job id'
          ? pgBossJobId(message)
          : expected === 'the outbox name'
            ? 'orders'
            : expected;
      expect((await jobOf(queue, message)).singletonKey).toBe(key);
    },
  );
});

/**
 * Delivers `messages` messages over `groups` groups through the relay, in batches of 50 as outboxer
 * would (a group's next message only after its earlier ones were inserted), while three PgBoss
 * nodes with four workers each run them, five jobs per fetch. Every seventh message fails on its
 * first attempt, every third of those retried after a second. Returns the ids each group's
 * handler started, in the order they started, and how many times a handler started while another
 * one of its group was still running.
 */
async function runWorkers(queue: string, work: WorkOptions, messages = 600, groups = 30) {
  const random = seededRandom(7);
  const batch = Array.from({ length: messages }, () =>
    makeEnvelope({ groupKey: `g${Math.floor(random() * groups)}` }),
  );
  const failOnce = new Set(batch.filter((_, n) => n % 7 === 3).map((m) => m.id));
  const delayed = new Set([...failOnce].filter((_, n) => n % 3 === 0));
  const started = new Map<string, number[]>();
  const running = new Map<string, number>();
  let overlaps = 0;
  const completed = new Set<number>();
  const nodes = [newBoss(6), newBoss(6), newBoss(6)];
  try {
    for (const node of nodes) {
      await node.start();
      await node.work<Data>(
        queue,
        {
          ...work,
          localConcurrency: 4,
          batchSize: 5,
          pollingIntervalSeconds: 0.5,
          burstWhenBatchFull: true,
          perJobResults: true,
        },
        (jobs) =>
          Promise.all(
            jobs.map(async (job) => {
              const { id, group } = { id: idOf(job), group: job.data.headers['outboxer-group-key']! };
              if ((running.get(group) ?? 0) > 0) overlaps += 1;
              running.set(group, (running.get(group) ?? 0) + 1);
              started.set(group, [...(started.get(group) ?? []), id]);
              await new Promise((resolve) => setTimeout(resolve, random() * 3));
              running.set(group, running.get(group)! - 1);
              if (failOnce.delete(id)) return { id: job.id, status: 'failed' as const };
              completed.add(id);
              return { id: job.id, status: 'completed' as const };
            }),
          ),
      );
    }
    const relay = pgBossRelay({
      boss,
      queue,
      jobOptions: (m) => ({ retryLimit: 3, retryDelay: delayed.has(m.id) ? 1 : 0 }),
    });
    for (let from = 0; from < messages; from += 50)
      expect((await deliverBatch(relay, batch.slice(from, from + 50))).every((o) => o.ok)).toBe(true);
    await waitUntil(() => completed.size === messages, 120_000, 'every job to complete');
  } finally {
    for (const node of nodes) await node.stop({ graceful: false });
  }
  const expected = new Map<string, number[]>();
  const retried = new Set(batch.filter((_, n) => n % 7 === 3).map((m) => m.id));
  for (const message of batch) {
    const ids = expected.get(message.groupKey!) ?? [];
    ids.push(...(retried.has(message.id) ? [message.id, message.id] : [message.id]));
    expected.set(message.groupKey!, ids);
  }
  return { started, expected, overlaps };
}

describe('several nodes with several workers each, many groups, jobs failing and retried', () => {
  test('key_strict_fifo: every group runs its jobs one at a time, in outbox order, each failed job retried before the next', async () => {
    const queue = await newQueue({ policy: 'key_strict_fifo' });
    const { started, expected, overlaps } = await runWorkers(queue, {});
    expect(overlaps).toBe(0);
    expect(new Map([...started].sort())).toEqual(new Map([...expected].sort()));
  }, 180_000);

  test('control: group + groupConcurrency 1 on a standard queue breaks that order, which the check above sees', async () => {
    const queue = await newQueue();
    const { started, expected } = await runWorkers(queue, { groupConcurrency: 1 });
    expect(new Map([...started].sort())).not.toEqual(new Map([...expected].sort()));
  }, 180_000);
});
