import { randomBytes } from 'node:crypto';
import { Queue, Worker, type Job } from 'bullmq';
import { Queue as QueueV5, Worker as WorkerV5 } from 'bullmq-v5';
import { bullmqRelay, type BullmqJobData } from 'outboxer/bullmq';
import { tcpProxy } from '../support/tcp-proxy.js';
import { relayContract, type Received } from './contract.js';

// The relay contract against the Redis on 127.0.0.1:6379 (shared with other tests: every queue
// lives under a random prefix, and the outage cuts a proxy in front of Redis, never Redis itself).
const REDIS = { host: '127.0.0.1', port: 6379 };
const prefix = `outboxer-test-${randomBytes(4).toString('hex')}`;

/** Reads a job back as the contract wants it; the dedupe id is the outbox id only if the job id is exactly `outboxer-events-<id>`. */
function received(job: Job<BullmqJobData>): Received {
  const { payload, headers } = job.data;
  const match = /^outboxer-events-(\d+)$/.exec(job.id ?? '');
  return {
    id: Number(headers['outboxer-id']),
    groupKey: headers['outboxer-group-key'] ?? null,
    payload,
    dedupeId: match?.[1] ?? job.id,
  };
}

/** The current BullMQ line, and the older one kept beside it (still maintained, and still in use). */
const bullmqLines = [
  { Queue, Worker, version: '6' },
  { Queue: QueueV5 as unknown as typeof Queue, Worker: WorkerV5 as unknown as typeof Worker, version: '5' },
] as const;

for (const { Queue, Worker, version } of bullmqLines) {
  relayContract({
    name: `bullmq ${version}`,
    keepsOrder: true,
    dedupesById: true,
    async destination() {
      const proxy = await tcpProxy(REDIS);
      const name = `orders-${randomBytes(4).toString('hex')}`;
      const queue = new Queue(name, { connection: { host: '127.0.0.1', port: proxy.port }, prefix });
      queue.on('error', () => undefined); // connection errors during the outage are expected
      const arrived: Received[] = [];
      // One worker at concurrency 1: the only set-up in which BullMQ runs jobs in the order they were added.
      const worker = new Worker<BullmqJobData>(name, async (job) => void arrived.push(received(job)), {
        connection: REDIS,
        prefix,
        concurrency: 1,
      });
      worker.on('error', () => undefined);
      return {
        relay: bullmqRelay({ queue, timeout: 2000 }),
        received: async () => arrived,
        outage: { begin: proxy.cut, end: proxy.restore },
        async teardown() {
          await worker.close();
          await queue.obliterate({ force: true });
          await queue.close();
          await proxy.cut();
        },
      };
    },
    async misconfigured() {
      // A Redis user that does not exist: ioredis retries forever, the relay's start() says why.
      const queue = new Queue(`orders-${randomBytes(4).toString('hex')}`, {
        connection: { ...REDIS, username: 'outboxer-nobody', password: 'wrong' },
        prefix,
      });
      queue.on('error', () => undefined);
      return {
        relay: bullmqRelay({ queue, timeout: 2000 }),
        error:
          /^RELAY_MISCONFIGURED: BullMQ queue "orders-\w+" cannot be used: WRONGPASS .*Fix the queue's connection options \(username, password, db\)/,
        teardown: () => queue.close(),
      };
    },
    async refusal() {
      // BullMQ's own check refuses a job larger than its sizeLimit, whatever the retry.
      const queue = new Queue(`orders-${randomBytes(4).toString('hex')}`, { connection: REDIS, prefix });
      return {
        relay: bullmqRelay({ queue, jobOptions: { sizeLimit: 200 } }),
        message: { payload: { text: 'x'.repeat(500) } },
        error:
          /^DELIVERY_FAILED: BullMQ refused job "outboxer-events-\d+" of queue "orders-\w+": .*exceeds the limit/,
        async teardown() {
          await queue.obliterate({ force: true });
          await queue.close();
        },
      };
    },
  });
}
