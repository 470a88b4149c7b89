import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { Queue, Worker, type Job } from 'bullmq';
import { bullmqRelay, type BullmqJobData } from 'outboxer/bullmq';
import { relayContract, type Received } from './contract.js';

// The relay contract against the Redis on 127.0.0.1:6379 (shared with other tests: every queue
// lives under a random prefix, and the outage cuts a proxy in front of Redis, never Redis itself).
const REDIS = { host: '127.0.0.1', port: 6379 };
const prefix = `outboxer-test-${randomBytes(4).toString('hex')}`;

/**
 * A TCP proxy in front of Redis whose cut() drops every connection and stops listening, and
 * whose restore() listens again on the same port: Redis down and back, for this client only.
 */
async function tcpProxy(target: { host: string; port: number }) {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  const listen = async (): Promise<void> => {
    const next = createServer((client) => {
      const upstream = connect(target.port, target.host);
      const close = (): void => {
        client.destroy();
        upstream.destroy();
        sockets.delete(client);
        sockets.delete(upstream);
      };
      for (const socket of [client, upstream]) {
        sockets.add(socket);
        socket.on('error', close);
        socket.on('close', close);
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    next.listen(port, '127.0.0.1');
    await once(next, 'listening');
    port = (next.address() as AddressInfo).port;
    server = next;
  };
  const cut = async (): Promise<void> => {
    const current = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    if (current !== undefined) await new Promise((resolve) => current.close(resolve));
  };
  await listen();
  return { port, cut, restore: listen, close: cut };
}

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

relayContract({
  name: 'bullmq',
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
      outage: { begin: () => proxy.cut(), end: () => proxy.restore() },
      async teardown() {
        await worker.close();
        await queue.obliterate({ force: true });
        await queue.close();
        await proxy.close();
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
    return { relay: bullmqRelay({ queue, timeout: 2000 }), teardown: () => queue.close() };
  },
});
