import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { isOutboxerError, type DeliveryOutcome } from 'outboxer';
import { outboxIdOfJobId, pgBossRelay, type PgBossJobData } from 'outboxer/pg-boss';
import { makeContext, makeEnvelope } from '../support/envelopes.js';
import { tcpProxy } from '../support/tcp-proxy.js';
import { relayContract, type Received } from './contract.js';
import { DATABASE_URL, lines, type Boss, type FetchedJob } from './pg-boss-lines.js';

// The relay contract against the Postgres on 127.0.0.1:5432, once per pg-boss line (12, 11, 10),
// each installed in a random schema (dropped at the end). The outage cuts a TCP proxy between the
// relay's PgBoss and Postgres: the database itself stays up for everyone else.
const target = new URL(DATABASE_URL);

function received(job: FetchedJob<PgBossJobData>): Received {
  const { payload, headers } = job.data;
  return {
    id: Number(headers['outboxer-id']),
    groupKey: headers['outboxer-group-key'] ?? null,
    payload,
    dedupeId: String(outboxIdOfJobId(job.id)),
  };
}

for (const line of lines) {
  describe(line.name, () => {
    const schema = `pgboss_${randomBytes(4).toString('hex')}`;
    // The consumer side: connects directly, installs pg-boss, creates and reads the queues.
    let consumer: Boss;
    // pg-boss 12 keeps a group's order on a key_strict_fifo queue only (docs/relays/pg-boss.md).
    const policy = line.major === 12 ? 'key_strict_fifo' : 'standard';

    beforeAll(async () => {
      consumer = line.create({ connectionString: DATABASE_URL, schema });
      await consumer.start();
    });
    afterAll(async () => {
      await consumer.sql(`DROP SCHEMA ${schema} CASCADE`);
      await consumer.stop();
    });

    /** A queue, and a PgBoss that reaches Postgres through a proxy that can be cut. */
    async function proxiedBoss() {
      const proxy = await tcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
      const url = new URL(DATABASE_URL);
      url.port = String(proxy.port);
      const boss = line.create({ connectionString: url.toString(), schema, migrate: false, max: 4 });
      await boss.start();
      const queue = `orders_${randomBytes(4).toString('hex')}`;
      await consumer.createQueue(queue, { policy });
      return {
        proxy,
        boss,
        queue,
        async close() {
          await boss.stop();
          await proxy.cut();
          // The queue stays: dropping the schema at the end removes it.
        },
      };
    }

    /**
     * One consumer, fetching batches. On a key_strict_fifo queue a fetch holds at most one job per
     * key, its head, and the next only once the head is complete. Elsewhere a batch comes back in no
     * particular order: sorted by (createdOn, id), the order fetch picked it in on pg-boss 10 and 11.
     */
    async function drain(queue: string, arrived: Received[]): Promise<Received[]> {
      for (;;) {
        const jobs = await consumer.fetch<PgBossJobData>(queue, 500);
        if (jobs.length === 0) return arrived;
        jobs.sort((a, b) => a.createdOn.getTime() - b.createdOn.getTime() || (a.id < b.id ? -1 : 1));
        arrived.push(...jobs.map(received));
        await consumer.complete(
          queue,
          jobs.map((job) => job.id),
        );
      }
    }

    relayContract({
      name: `${line.name} (${policy} queue)`,
      keepsOrder: true,
      dedupesById: true,
      async destination() {
        const { proxy, boss, queue, close } = await proxiedBoss();
        const arrived: Received[] = [];
        return {
          relay: pgBossRelay({ boss: boss.raw, queue, timeout: 2000 }),
          received: () => drain(queue, arrived),
          outage: { begin: proxy.cut, end: proxy.restore },
          teardown: close,
        };
      },
      async misconfigured() {
        // The queue was never created.
        return {
          relay: pgBossRelay({
            boss: consumer.raw,
            queue: `missing_${randomBytes(4).toString('hex')}`,
            timeout: 2000,
          }),
          error:
            /^RELAY_MISCONFIGURED: pg-boss queue "missing_\w+" does not exist.*Create it first: await boss\.createQueue/,
        };
      },
      async refusal() {
        // jsonb refuses \u0000: Postgres turns the job down, however often it is inserted.
        const queue = `orders_${randomBytes(4).toString('hex')}`;
        await consumer.createQueue(queue, { policy });
        return {
          relay: pgBossRelay({ boss: consumer.raw, queue, timeout: 2000 }),
          message: { payload: { text: 'nul \u0000 byte' } },
          error: /^DELIVERY_FAILED: Postgres refused pg-boss job .*\(SQLSTATE 22P05\)/,
        };
      },
    });

    describe('relay while the database is unreachable', () => {
      test('start() treats it as an outage, not a misconfiguration; a batch fails as a whole, then goes through', async () => {
        const destination = await proxiedBoss();
        try {
          const relay = pgBossRelay({ boss: destination.boss.raw, queue: destination.queue, timeout: 2000 });
          await destination.proxy.cut();
          await expect(relay.start!()).resolves.toBeUndefined();
          const context = makeContext();
          const batch = [makeEnvelope({ id: 1, groupKey: 'a' }), makeEnvelope({ id: 2, groupKey: 'b' })];
          const error = await relay.deliver(batch, context).then(
            () => undefined,
            (caught: unknown) => caught,
          );
          expect(isOutboxerError(error) && error.code).toBe('DELIVERY_FAILED');
          expect((error as Error).message).toMatch(
            /ECONNREFUSED|Connection terminated|timeout|did not finish/i,
          );
          await destination.proxy.restore();
          expect(await relay.deliver(batch, context)).toEqual<DeliveryOutcome[]>([
            { ok: true },
            { ok: true },
          ]);
          expect(await consumer.count(destination.queue)).toBe(2);
        } finally {
          await destination.close();
        }
      });
    });
  });
}
