import { randomBytes, randomInt } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PermanentError, SKIPPED, type Envelope, type OutboxerError } from 'outboxer';
import {
  outboxIdOfJobId,
  pgBossJobId,
  pgBossRelay,
  type PgBoss10Like,
  type PgBossJobData,
  type PgBossLike,
} from 'outboxer/pg-boss';
import { deliverBatch, makeContext, makeEnvelope } from '../support/envelopes.js';
import { invalidOptions } from './contract.js';
import { DATABASE_URL, lines, type Boss, type FetchedJob } from './pg-boss-lines.js';

// Focused tests of outboxer/pg-boss against the Postgres on 127.0.0.1:5432, once per pg-boss line
// (12, 11, 10), each installed in a random schema that is dropped at the end. pg-boss 12's
// ordering across workers has a file of its own: pg-boss-ordering.test.ts.

const envelope = (overrides: Partial<Envelope> = {}) =>
  makeEnvelope({ groupKey: 'g1', payload: { n: 1 }, ...overrides });

async function errorOf(promise: Promise<unknown>): Promise<OutboxerError | undefined> {
  return promise.then(
    () => undefined,
    (error: unknown) => error as OutboxerError,
  );
}

describe('pgBossRelay options', () => {
  const current: PgBossLike = { insert: async (): Promise<void> => undefined, getQueue: async () => null };
  const v10: PgBoss10Like = { ...current, insert: async () => undefined, getQueueSize: async () => 0 };

  test.each([
    [undefined, /pgBossRelay\(options\)/],
    [{ queue: 'q' }, /pgBossRelay\.boss/],
    [{ boss: { insert: (): void => undefined }, queue: 'q' }, /pgBossRelay\.boss.*getQueue/],
    [{ boss: current }, /pgBossRelay\.queue/],
    [{ boss: current, queue: '' }, /pgBossRelay\.queue/],
    [{ boss: current, queue: 'q', topic: 't' }, /Unknown option "pgBossRelay\.topic"/],
    [{ boss: current, queue: 'q', jobData: {} }, /pgBossRelay\.jobData/],
    [
      { boss: current, queue: 'q', jobOptions: { singletonKey: 'k' } },
      /pgBossRelay\.jobOptions.*only priority/,
    ],
    [{ boss: current, queue: 'q', jobOptions: { id: 'x' } }, /pgBossRelay\.jobOptions/],
    // Each line takes the options its insert reads.
    [
      { boss: current, queue: 'q', jobOptions: { keepUntil: '2030-01-01' } },
      /pgBossRelay\.jobOptions.*retentionSeconds/,
    ],
    [{ boss: v10, queue: 'q', jobOptions: { retentionSeconds: 60 } }, /pgBossRelay\.jobOptions.*keepUntil/],
    [{ boss: current, queue: 'q', group: 'tenant' }, /pgBossRelay\.group/],
    [{ boss: current, queue: 'q', idNamespace: 1 }, /pgBossRelay\.idNamespace/],
    [{ boss: current, queue: 'q', timeout: -1 }, /pgBossRelay\.timeout/],
    [{ boss: current, queue: 'q', name: '' }, /pgBossRelay\.name/],
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

for (const line of lines) {
  describe(`pgBossRelay against Postgres, ${line.name}`, () => {
    const schema = `pgboss_${randomBytes(4).toString('hex')}`;
    let boss: Boss;

    beforeAll(async () => {
      boss = line.create({ connectionString: DATABASE_URL, schema });
      await boss.start();
    });
    afterAll(async () => {
      await boss.sql(`DROP SCHEMA ${schema} CASCADE`);
      await boss.stop();
    });

    async function newQueue(options: { policy?: string } = {}): Promise<string> {
      const name = `q_${randomBytes(4).toString('hex')}`;
      await boss.createQueue(name, options);
      return name;
    }

    /**
     * Fetches the queue one job at a time and completes each: the order one worker taking one job at
     * a time runs them in.
     */
    async function fetchAll(queue: string): Promise<Array<FetchedJob<PgBossJobData>>> {
      const jobs: Array<FetchedJob<PgBossJobData>> = [];
      for (
        let [job] = await boss.fetch<PgBossJobData>(queue);
        job !== undefined;
        [job] = await boss.fetch(queue)
      ) {
        jobs.push(job);
        await boss.complete(queue, [job.id]);
      }
      return jobs;
    }

    test('inserts one job per message: ordered id from the outbox id, data { payload, headers }, job options', async () => {
      const queue = await newQueue();
      const relay = pgBossRelay({ boss: boss.raw, queue, jobOptions: { retryLimit: 5 } });
      const message = envelope({
        type: 'OrderPaid',
        payload: { orderId: 7 },
        headers: { 'trace-id': 'abc' },
        groupKey: 'order:7',
      });
      expect(await deliverBatch(relay, [message])).toEqual([{ ok: true }]);
      const job = (await boss.getJob<PgBossJobData>(queue, pgBossJobId(message)))!;
      expect(job.retryLimit).toBe(5);
      expect(job.singletonKey).toBeNull(); // set on key_strict_fifo queues only
      // pg-boss 12's group, from the group key; 11 and 10 have no groups.
      if (line.major === 12) expect(job.groupId).toBe('order:7');
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

    // pg-boss 10 and 11 fetch by (priority, created_on, id), so the ordered job ids keep a batch's
    // order on any queue. pg-boss 12 (since 12.30) dropped the id from the fetch's ORDER BY: only a
    // key_strict_fifo queue, which picks each key's head by (created_on, id), keeps it there.
    const orderedQueue = line.major === 12 ? { policy: 'key_strict_fifo' } : {};
    test(`jobs inserted together come out of fetch in outbox order (${orderedQueue.policy ?? 'standard'} queue), which plain pg-boss ids do not give`, async () => {
      const queue = await newQueue(orderedQueue);
      const batch = Array.from({ length: 300 }, (_, n) => envelope({ payload: { n } }));
      expect((await deliverBatch(pgBossRelay({ boss: boss.raw, queue }), batch)).every((o) => o.ok)).toBe(
        true,
      );
      const fetched = await fetchAll(queue);
      expect(fetched.map((job) => Number(job.data.headers['outboxer-id']))).toEqual(batch.map((m) => m.id));

      // Control: the same insert with pg-boss's own (random) ids. One created_on for all, so the
      // tie is broken by a random id: the order is lost.
      const control = await newQueue(orderedQueue);
      await boss.insertPlain(
        control,
        batch.map((m) => ({
          data: m.payload as object,
          ...(orderedQueue.policy ? { singletonKey: 'g1' } : {}),
        })),
      );
      const order = (await fetchAll(control)).map((job) => (job.data as unknown as { n: number }).n);
      expect(order).toHaveLength(300);
      expect(order).not.toEqual([...order].sort((a, b) => a - b));
    });

    test('a redelivered message is ignored while its job is in the job table', async () => {
      const queue = await newQueue();
      const relay = pgBossRelay({ boss: boss.raw, queue });
      const batch = [envelope({ payload: { v: 1 } }), envelope({ payload: { v: 1 } })];
      await deliverBatch(relay, batch);
      expect(
        await deliverBatch(
          relay,
          batch.map((m) => ({ ...m, payload: { v: 2 } })),
        ),
      ).toEqual([{ ok: true }, { ok: true }]);
      expect(await boss.count(queue)).toBe(2);
      expect((await boss.getJob<PgBossJobData>(queue, pgBossJobId(batch[0]!)))!.data.payload).toEqual({
        v: 1,
      });
    });

    test('once a completed job has left the job table, a redelivery inserts it again (the documented window)', async () => {
      const queue = await newQueue();
      const relay = pgBossRelay({ boss: boss.raw, queue });
      const message = envelope();
      await deliverBatch(relay, [message]);
      const [job] = await boss.fetch(queue);
      await boss.complete(queue, [job!.id]);
      // What pg-boss's maintenance does once the retention is over (archive in 10, delete in 11 and 12).
      await boss.deleteJob(queue, job!.id);
      expect(await boss.count(queue)).toBe(0);
      await deliverBatch(relay, [message]);
      expect(await boss.count(queue)).toBe(1);
    });

    test('a job Postgres refuses for good is a PermanentError; the rest of its group waits, other groups go on', async () => {
      const queue = await newQueue();
      const relay = pgBossRelay({ boss: boss.raw, queue });
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
      expect(new Set((await fetchAll(queue)).map((job) => job.id))).toEqual(
        new Set([first!, other!, ungrouped!].map((m) => pgBossJobId(m))),
      );
    });

    test('a message routed to a queue that does not exist fails (misconfiguration) and holds back its group only', async () => {
      const queue = await newQueue();
      const missing = `missing_${randomBytes(4).toString('hex')}`;
      const relay = pgBossRelay({ boss: boss.raw, queue: (m) => (m.type === 'lost' ? missing : queue) });
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
      expect(await boss.count(queue)).toBe(1);
    });

    test('messages routed to two queues go out in one insert per queue', async () => {
      const [orders, invoices] = [await newQueue(), await newQueue()];
      const relay = pgBossRelay({ boss: boss.raw, queue: (m) => (m.type === 'Invoice' ? invoices : orders) });
      const batch = [envelope(), envelope({ type: 'Invoice' }), envelope(), envelope({ type: 'Invoice' })];
      expect((await deliverBatch(relay, batch)).every((o) => o.ok)).toBe(true);
      expect([await boss.count(orders), await boss.count(invoices)]).toEqual([2, 2]);
      expect((await boss.getJob(invoices, pgBossJobId(batch[1]!)))?.id).toBe(pgBossJobId(batch[1]!));
    });

    test('an aborted delivery inserts nothing', async () => {
      const queue = await newQueue();
      const controller = new AbortController();
      controller.abort(new Error('outboxer is stopping'));
      const outcomes = await errorOf(
        deliverBatch(
          pgBossRelay({ boss: boss.raw, queue }),
          [envelope()],
          makeContext({ signal: controller.signal }),
        ),
      );
      expect(outcomes?.message).toMatch(/abandoned: outboxer is stopping/);
      expect(await boss.count(queue)).toBe(0);
    });

    test('start() fails with RELAY_MISCONFIGURED for a queue that does not exist', async () => {
      const error = await errorOf(pgBossRelay({ boss: boss.raw, queue: 'never_created' }).start!());
      expect(error?.code).toBe('RELAY_MISCONFIGURED');
      expect(error?.message).toContain("await boss.createQueue('never_created')");
    });

    test.each(line.droppingPolicies)(
      'start() fails for a queue with the %s policy, which would drop jobs',
      async (policy) => {
        const queue = await newQueue({ policy });
        const error = await errorOf(pgBossRelay({ boss: boss.raw, queue }).start!());
        expect(error?.code).toBe('RELAY_MISCONFIGURED');
        expect(error?.message).toMatch(new RegExp(`"${policy}" policy.*lose messages`));
      },
    );

    test('start() fails for a PgBoss that was not started', async () => {
      const idle = line.create({ connectionString: DATABASE_URL, schema });
      const error = await errorOf(pgBossRelay({ boss: idle.raw, queue: 'orders' }).start!());
      expect(error?.code).toBe('RELAY_MISCONFIGURED');
      expect(error?.message).toMatch(/not started.*boss\.start\(\)/);
    });

    test('start() fails when the pg-boss tables are gone', async () => {
      const otherSchema = `pgboss_${randomBytes(4).toString('hex')}`;
      const other = line.create({ connectionString: DATABASE_URL, schema: otherSchema, max: 1 });
      await other.start();
      try {
        await other.sql(`DROP SCHEMA ${otherSchema} CASCADE`);
        const error = await errorOf(pgBossRelay({ boss: other.raw, queue: 'orders' }).start!());
        expect(error?.code).toBe('RELAY_MISCONFIGURED');
        expect(error?.message).toMatch(/tables are not there/);
      } finally {
        await other.stop();
      }
    });
  });
}
