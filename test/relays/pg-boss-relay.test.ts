import { randomBytes, randomInt } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import PgBoss from 'pg-boss';
import { PermanentError, SKIPPED, type Envelope, type OutboxerError } from 'outboxer';
import {
  outboxIdOfJobId,
  pgBossJobId,
  pgBossRelay,
  type PgBossJobData,
  type PgBossLike,
} from 'outboxer/pg-boss';
import { deliverBatch, makeContext, makeEnvelope } from '../support/envelopes.js';
import { invalidOptions } from './contract.js';

// Focused tests of outboxer/pg-boss against the Postgres on 127.0.0.1:5432, pg-boss installed in
// a random schema that is dropped at the end.
const DATABASE_URL = process.env.OUTBOXER_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const schema = `pgboss_${randomBytes(4).toString('hex')}`;
let boss: PgBoss;

beforeAll(async () => {
  boss = new PgBoss({ connectionString: DATABASE_URL, schema, supervise: false, schedule: false, max: 3 });
  boss.on('error', () => undefined);
  await boss.start();
});
afterAll(async () => {
  await boss.getDb().executeSql(`DROP SCHEMA ${schema} CASCADE`, []);
  await boss.stop({ graceful: false });
});

async function newQueue(options: PgBoss.Queue | Record<string, never> = {}): Promise<string> {
  const name = `q_${randomBytes(4).toString('hex')}`;
  await boss.createQueue(name, options as PgBoss.Queue);
  return name;
}

const envelope = (overrides: Partial<Envelope> = {}) =>
  makeEnvelope({ groupKey: 'g1', payload: { n: 1 }, ...overrides });

/** Fetches the queue one job at a time, the order pg-boss hands jobs out in. */
async function fetchAll(queue: string): Promise<Array<PgBoss.Job<PgBossJobData>>> {
  const jobs: Array<PgBoss.Job<PgBossJobData>> = [];
  for (
    let [job] = await boss.fetch<PgBossJobData>(queue);
    job !== undefined;
    [job] = await boss.fetch<PgBossJobData>(queue)
  )
    jobs.push(job);
  return jobs;
}

async function errorOf(promise: Promise<unknown>): Promise<OutboxerError | undefined> {
  return promise.then(
    () => undefined,
    (error: unknown) => error as OutboxerError,
  );
}

describe('pgBossRelay options', () => {
  const fake: PgBossLike = { insert: async (): Promise<void> => undefined, getQueue: async () => null };

  test.each([
    [undefined, /pgBossRelay\(options\)/],
    [{ queue: 'q' }, /pgBossRelay\.boss/],
    [{ boss: { insert: (): void => undefined }, queue: 'q' }, /pgBossRelay\.boss.*getQueue/],
    [{ boss: fake }, /pgBossRelay\.queue/],
    [{ boss: fake, queue: '' }, /pgBossRelay\.queue/],
    [{ boss: fake, queue: 'q', topic: 't' }, /Unknown option "pgBossRelay\.topic"/],
    [{ boss: fake, queue: 'q', jobData: {} }, /pgBossRelay\.jobData/],
    [{ boss: fake, queue: 'q', jobOptions: { singletonKey: 'k' } }, /pgBossRelay\.jobOptions.*only priority/],
    [{ boss: fake, queue: 'q', jobOptions: { id: 'x' } }, /pgBossRelay\.jobOptions/],
    [{ boss: fake, queue: 'q', idNamespace: 1 }, /pgBossRelay\.idNamespace/],
    [{ boss: fake, queue: 'q', timeout: -1 }, /pgBossRelay\.timeout/],
    [{ boss: fake, queue: 'q', name: '' }, /pgBossRelay\.name/],
  ])('rejects %j', (options, message) => {
    expect(invalidOptions(() => pgBossRelay(options as never))).toMatch(message);
  });
});

describe('pgBossJobId', () => {
  test('is a version 8 UUID that gives the outbox id back, and depends on outbox and namespace', () => {
    const id = pgBossJobId({ outbox: 'orders', id: 123_456_789 });
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(pgBossJobId({ outbox: 'orders', id: 123_456_789 })).toBe(id);
    expect(outboxIdOfJobId(id)).toBe(123_456_789);
    expect(outboxIdOfJobId(pgBossJobId({ outbox: 'x', id: Number.MAX_SAFE_INTEGER }))).toBe(
      Number.MAX_SAFE_INTEGER,
    );
    expect(pgBossJobId({ outbox: 'invoices', id: 123_456_789 })).not.toBe(id);
    expect(pgBossJobId({ outbox: 'orders', id: 123_456_789 }, 'billing')).not.toBe(id);
    expect(outboxIdOfJobId('0ee4b0be-a4db-4674-a76d-33161f3dd084')).toBeUndefined(); // a random v4 uuid
  });

  test('sorts like the outbox ids, across the 12-bit boundary too', () => {
    const ids = [
      0,
      1,
      4095,
      4096,
      4097,
      65_535,
      1_000_000,
      ...Array.from({ length: 200 }, () => randomInt(2 ** 47)),
    ];
    const byUuid = [...ids].sort((a, b) =>
      pgBossJobId({ outbox: 'o', id: a }) < pgBossJobId({ outbox: 'o', id: b }) ? -1 : 1,
    );
    expect(byUuid).toEqual([...ids].sort((a, b) => a - b));
  });
});

describe('pgBossRelay against Postgres', () => {
  test('inserts one job per message: ordered id from the outbox id, data { payload, headers }, job options', async () => {
    const queue = await newQueue();
    const relay = pgBossRelay({ boss, queue, jobOptions: { retryLimit: 5 } });
    const message = envelope({
      type: 'OrderPaid',
      payload: { orderId: 7 },
      headers: { 'trace-id': 'abc' },
      groupKey: 'order:7',
    });
    expect(await deliverBatch(relay, [message])).toEqual([{ ok: true }]);
    const job = (await boss.getJobById<PgBossJobData>(queue, pgBossJobId(message)))!;
    expect(job.retryLimit).toBe(5);
    expect(job.data).toEqual({
      payload: { orderId: 7 },
      headers: {
        'trace-id': 'abc',
        'outboxer-id': String(message.id),
        'outboxer-outbox': 'events',
        'outboxer-type': 'OrderPaid',
        'outboxer-group-key': 'order:7',
      },
    });
  });

  test('jobs inserted together come out of fetch in outbox order, which plain pg-boss ids do not give', async () => {
    const queue = await newQueue();
    const batch = Array.from({ length: 300 }, (_, n) => envelope({ payload: { n } }));
    expect((await deliverBatch(pgBossRelay({ boss, queue }), batch)).every((o) => o.ok)).toBe(true);
    const fetched = await fetchAll(queue);
    expect(fetched.map((job) => Number(job.data.headers['outboxer-id']))).toEqual(batch.map((m) => m.id));

    // Control: the same insert with pg-boss's own (random) ids. One created_on for all, so fetch
    // orders by id, which is random: the order is lost.
    const control = await newQueue();
    await boss.insert(batch.map((m) => ({ name: control, data: { n: (m.payload as { n: number }).n } })));
    const order = (await fetchAll(control)).map((job) => (job.data as unknown as { n: number }).n);
    expect(order).not.toEqual([...order].sort((a, b) => a - b));
  });

  test('a redelivered message is ignored while its job is in the job table', async () => {
    const queue = await newQueue();
    const relay = pgBossRelay({ boss, queue });
    const batch = [envelope({ payload: { v: 1 } }), envelope({ payload: { v: 1 } })];
    await deliverBatch(relay, batch);
    expect(
      await deliverBatch(
        relay,
        batch.map((m) => ({ ...m, payload: { v: 2 } })),
      ),
    ).toEqual([{ ok: true }, { ok: true }]);
    expect(await boss.getQueueSize(queue)).toBe(2);
    expect((await boss.getJobById<PgBossJobData>(queue, pgBossJobId(batch[0]!)))!.data.payload).toEqual({
      v: 1,
    });
  });

  test('once a completed job is archived, a redelivery inserts it again (the documented window)', async () => {
    const queue = await newQueue();
    const relay = pgBossRelay({ boss, queue });
    const message = envelope();
    await deliverBatch(relay, [message]);
    const [job] = await boss.fetch(queue);
    await boss.complete(queue, job!.id);
    // pg-boss's maintenance archives completed jobs after archiveCompletedAfterSeconds (12 hours
    // by default); here after 1 second, run by hand.
    const archiver = new PgBoss({
      connectionString: DATABASE_URL,
      schema,
      supervise: false,
      schedule: false,
      archiveCompletedAfterSeconds: 1,
      max: 1,
    });
    archiver.on('error', () => undefined);
    await archiver.start();
    try {
      await new Promise((resolve) => setTimeout(resolve, 1100));
      await archiver.archive();
    } finally {
      await archiver.stop({ graceful: false });
    }
    expect(await boss.getJobById(queue, job!.id)).toBeNull();
    await deliverBatch(relay, [message]);
    expect(await boss.getQueueSize(queue)).toBe(1);
  });

  test('a job Postgres refuses for good is a PermanentError; the rest of its group waits, other groups go on', async () => {
    const queue = await newQueue();
    const relay = pgBossRelay({ boss, queue });
    // jsonb refuses \u0000: the whole insert fails, and the relay inserts the jobs one by one to find it.
    const [first, poison, behind, other, ungrouped] = [
      envelope({ groupKey: 'a' }),
      envelope({ groupKey: 'a', payload: { text: 'nul \u0000 byte' } }),
      envelope({ groupKey: 'a' }),
      envelope({ groupKey: 'b' }),
      envelope({ groupKey: null }),
    ];
    const outcomes = await deliverBatch(relay, [first!, poison!, behind!, other!, ungrouped!]);
    expect(outcomes.map((o) => o.ok)).toEqual([true, false, false, true, true]);
    const error = (outcomes[1] as { error: PermanentError }).error;
    expect(error).toBeInstanceOf(PermanentError);
    expect(error.message).toMatch(/22P05/);
    expect(outcomes[2]).toEqual({ ok: false, error: SKIPPED });
    expect((await fetchAll(queue)).map((job) => job.id)).toEqual(
      [first!, other!, ungrouped!].map((m) => pgBossJobId(m)),
    );
  });

  test('a message routed to a queue that does not exist fails (misconfiguration) and holds back its group only', async () => {
    const queue = await newQueue();
    const missing = `missing_${randomBytes(4).toString('hex')}`;
    const relay = pgBossRelay({ boss, queue: (m) => (m.type === 'lost' ? missing : queue) });
    const lost = envelope({ groupKey: 'a', type: 'lost' });
    const behind = envelope({ groupKey: 'a' });
    const other = envelope({ groupKey: 'b' });
    const outcomes = await deliverBatch(relay, [lost, behind, other]);
    const error = (outcomes[0] as { error: OutboxerError }).error;
    expect(error.code).toBe('RELAY_MISCONFIGURED');
    expect(error.retryable).toBe(true);
    expect(error.message).toContain(`boss.createQueue('${missing}')`);
    expect(outcomes[1]).toEqual({ ok: false, error: SKIPPED });
    expect(outcomes[2]).toEqual({ ok: true });
    expect(await boss.getQueueSize(queue)).toBe(1);
  });

  test('an aborted delivery inserts nothing', async () => {
    const queue = await newQueue();
    const controller = new AbortController();
    controller.abort(new Error('outboxer is stopping'));
    const outcomes = await errorOf(
      deliverBatch(pgBossRelay({ boss, queue }), [envelope()], makeContext({ signal: controller.signal })),
    );
    expect(outcomes?.message).toMatch(/abandoned: outboxer is stopping/);
    expect(await boss.getQueueSize(queue)).toBe(0);
  });

  test('start() fails with RELAY_MISCONFIGURED for a queue that does not exist', async () => {
    const error = await errorOf(pgBossRelay({ boss, queue: 'never_created' }).start!());
    expect(error?.code).toBe('RELAY_MISCONFIGURED');
    expect(error?.message).toContain("await boss.createQueue('never_created')");
  });

  test.each(['short', 'stately'] as const)(
    'start() fails for a queue with the %s policy, which would drop jobs',
    async (policy) => {
      const queue = await newQueue({ name: '', policy });
      const error = await errorOf(pgBossRelay({ boss, queue }).start!());
      expect(error?.code).toBe('RELAY_MISCONFIGURED');
      expect(error?.message).toMatch(new RegExp(`"${policy}" policy.*lose messages`));
    },
  );

  test('start() fails for a PgBoss that was not started', async () => {
    const idle = new PgBoss({ connectionString: DATABASE_URL, schema });
    const error = await errorOf(pgBossRelay({ boss: idle, queue: 'orders' }).start!());
    expect(error?.code).toBe('RELAY_MISCONFIGURED');
    expect(error?.message).toMatch(/not started.*boss\.start\(\)/);
  });

  test('start() fails when the pg-boss tables are gone', async () => {
    const otherSchema = `pgboss_${randomBytes(4).toString('hex')}`;
    const other = new PgBoss({
      connectionString: DATABASE_URL,
      schema: otherSchema,
      supervise: false,
      schedule: false,
      max: 1,
    });
    other.on('error', () => undefined);
    await other.start();
    try {
      await other.getDb().executeSql(`DROP SCHEMA ${otherSchema} CASCADE`, []);
      const error = await errorOf(pgBossRelay({ boss: other, queue: 'orders' }).start!());
      expect(error?.code).toBe('RELAY_MISCONFIGURED');
      expect(error?.message).toMatch(/tables are not there/);
    } finally {
      await other.stop({ graceful: false });
    }
  });
});
