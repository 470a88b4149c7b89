import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import PgBoss from 'pg-boss';
import { isOutboxerError, type DeliveryOutcome } from 'outboxer';
import { outboxIdOfJobId, pgBossRelay, type PgBossJobData } from 'outboxer/pg-boss';
import { makeContext, makeEnvelope } from '../support/envelopes.js';
import { tcpProxy } from '../support/tcp-proxy.js';
import { relayContract, type Received } from './contract.js';

// The relay contract against the Postgres on 127.0.0.1:5432, pg-boss installed in a random schema
// (dropped at the end). The outage cuts a TCP proxy between the relay's PgBoss and Postgres: the
// database itself stays up for everyone else.
const DATABASE_URL = process.env.OUTBOXER_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const schema = `pgboss_${randomBytes(4).toString('hex')}`;
const target = new URL(DATABASE_URL);
let consumer: PgBoss;

beforeAll(async () => {
  // The consumer side: connects directly, installs pg-boss, creates and reads the queues.
  consumer = new PgBoss({
    connectionString: DATABASE_URL,
    schema,
    supervise: false,
    schedule: false,
    max: 3,
  });
  consumer.on('error', () => undefined);
  await consumer.start();
});
afterAll(async () => {
  await consumer.getDb().executeSql(`DROP SCHEMA ${schema} CASCADE`, []);
  await consumer.stop({ graceful: false });
});

/** A queue, and a PgBoss that reaches Postgres through a proxy that can be cut. */
async function proxiedBoss() {
  const proxy = await tcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
  const url = new URL(DATABASE_URL);
  url.port = String(proxy.port);
  const boss = new PgBoss({
    connectionString: url.toString(),
    schema,
    supervise: false,
    schedule: false,
    migrate: false,
    max: 4,
  });
  boss.on('error', () => undefined); // connection errors during the outage are expected
  await boss.start();
  const queue = `orders_${randomBytes(4).toString('hex')}`;
  await consumer.createQueue(queue);
  return {
    proxy,
    boss,
    queue,
    async close() {
      await boss.stop({ graceful: false });
      await proxy.cut();
      // The queue stays: dropping the schema at the end removes it (deleteQueue trips over its jobs).
    },
  };
}

function received(job: PgBoss.Job<PgBossJobData>): Received {
  const { payload, headers } = job.data;
  return {
    id: Number(headers['outboxer-id']),
    groupKey: headers['outboxer-group-key'] ?? null,
    payload,
    dedupeId: String(outboxIdOfJobId(job.id)),
  };
}

relayContract({
  name: 'pg-boss',
  keepsOrder: true,
  dedupesById: true,
  async destination() {
    const { proxy, boss, queue, close } = await proxiedBoss();
    const arrived: Received[] = [];
    return {
      relay: pgBossRelay({ boss, queue, timeout: 2000 }),
      // One consumer, as docs/relays/pg-boss.md recommends for ordered work: fetch a batch, sort it
      // by (createdOn, id) – the order fetch picked it in, which RETURNING does not keep – and
      // handle it in that order.
      async received() {
        for (;;) {
          const jobs = await consumer.fetch<PgBossJobData>(queue, { batchSize: 500, includeMetadata: true });
          if (jobs.length === 0) return arrived;
          jobs.sort((a, b) => a.createdOn.getTime() - b.createdOn.getTime() || (a.id < b.id ? -1 : 1));
          arrived.push(...jobs.map(received));
          await consumer.complete(
            queue,
            jobs.map((job) => job.id),
          );
        }
      },
      outage: { begin: proxy.cut, end: proxy.restore },
      teardown: close,
    };
  },
  async misconfigured() {
    // pg-boss 10 needs createQueue; this one was never created.
    return {
      relay: pgBossRelay({
        boss: consumer,
        queue: `missing_${randomBytes(4).toString('hex')}`,
        timeout: 2000,
      }),
      error:
        /^RELAY_MISCONFIGURED: pg-boss queue "missing_\w+" does not exist, .*Create it first: await boss\.createQueue/,
    };
  },
  async refusal() {
    // jsonb refuses \u0000: Postgres turns the job down, however often it is inserted.
    const queue = `orders_${randomBytes(4).toString('hex')}`;
    await consumer.createQueue(queue);
    return {
      relay: pgBossRelay({ boss: consumer, queue, timeout: 2000 }),
      message: { payload: { text: 'nul \u0000 byte' } },
      error: /^DELIVERY_FAILED: Postgres refused pg-boss job .*\(SQLSTATE 22P05\)/,
    };
  },
});

describe('pg-boss relay while the database is unreachable', () => {
  test('start() treats it as an outage, not a misconfiguration; a batch fails as a whole, then goes through', async () => {
    const destination = await proxiedBoss();
    try {
      const relay = pgBossRelay({ boss: destination.boss, queue: destination.queue, timeout: 2000 });
      await destination.proxy.cut();
      await expect(relay.start!()).resolves.toBeUndefined();
      const context = makeContext();
      const batch = [makeEnvelope({ id: 1, groupKey: 'a' }), makeEnvelope({ id: 2, groupKey: 'b' })];
      const error = await relay.deliver(batch, context).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(isOutboxerError(error) && error.code).toBe('DELIVERY_FAILED');
      expect((error as Error).message).toMatch(/ECONNREFUSED|Connection terminated|timeout|did not finish/i);
      await destination.proxy.restore();
      expect(await relay.deliver(batch, context)).toEqual<DeliveryOutcome[]>([{ ok: true }, { ok: true }]);
      expect(await consumer.getQueueSize(destination.queue)).toBe(2);
    } finally {
      await destination.close();
    }
  });
});
