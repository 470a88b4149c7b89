/**
 * The relay contract against Redis on 127.0.0.1:6379, plus the recovery tests. Every destination
 * is a stream with a random key, deleted afterwards.
 *
 * Outage: the Redis server is shared, so it is never stopped. The relay's ioredis client goes
 * through a small TCP proxy in this process instead; cutting it (closing the listener and every
 * piped socket) is what a restart or a network failure looks like to ioredis, which keeps
 * reconnecting; restoring it listens on the same port again. The test reads over its own, direct
 * client.
 */
import { Redis } from 'ioredis';
import { Redis as RedisV5 } from 'ioredis-v5';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { SKIPPED, type DeliveryOutcome } from 'outboxer';
import { redisStreamsRelay } from 'outboxer/redis-streams';
import { makeContext, makeEnvelope } from '../support/envelopes.js';
import { tcpProxy } from '../support/tcp-proxy.js';
import { relayContract, waitFor, type Destination, type Received } from './contract.js';

const random = () => Math.random().toString(36).slice(2, 10);

/** The current ioredis line, and the older one kept beside it: the relay takes either client. */
const ioredisLines = [
  { Client: Redis, version: '6' },
  { Client: RedisV5 as unknown as typeof Redis, version: '5' },
] as const;

/** An ioredis client through the proxy that retries every 100 ms (quicker than its default, for tests). */
function proxiedClient(Client: typeof Redis, port: number): Redis {
  const client = new Client({ host: '127.0.0.1', port, retryStrategy: () => 100 });
  client.on('error', () => undefined); // reconnection errors during an outage are expected
  return client;
}

let redis: Redis;
beforeAll(() => {
  redis = new Redis({ host: '127.0.0.1', port: 6379 });
});
afterAll(async () => {
  await redis.quit();
});

/** Everything in the stream `key`, as the contract's consumer sees it. */
async function readStream(key: string): Promise<Received[]> {
  const entries = await redis.xrange(key, '-', '+');
  return entries.map(([, flat]) => {
    const fields = Object.fromEntries(
      Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i]!, flat[2 * i + 1]!]),
    );
    return { id: Number(fields.id), groupKey: fields.groupKey ?? null, payload: JSON.parse(fields.payload!) };
  });
}

const envelope = (id: number, groupKey: string | null) => makeEnvelope({ id, groupKey });

for (const { Client, version } of ioredisLines) {
  relayContract({
    name: `redis-streams (ioredis ${version})`,
    keepsOrder: true,
    // No deduplication id at the destination: consumers deduplicate on the `id` field.
    dedupesById: false,
    // No refusal hook: Redis takes any XADD to a stream key (no size limit short of proto-max-bulk-len,
    // 512 MB; a key of another type is the misconfiguration above, retried until it is fixed).
    outboxOptions: { partitions: 2 },
    async destination(): Promise<Destination> {
      const key = `outboxer:test:${random()}`;
      const proxy = await tcpProxy(6379);
      const client = proxiedClient(Client, proxy.port);
      return {
        relay: redisStreamsRelay({ redis: client, stream: key, timeout: 1000 }),
        received: () => readStream(key),
        outage: { begin: proxy.cut, end: proxy.restore },
        async teardown() {
          client.disconnect();
          await proxy.cut();
          await redis.del(key);
        },
      };
    },
    async misconfigured() {
      // The stream key already holds a string: XADD would fail with WRONGTYPE, and start() says so.
      const key = `outboxer:test:${random()}`;
      await redis.set(key, 'not a stream');
      return {
        relay: redisStreamsRelay({ redis, stream: key }),
        error:
          /^RELAY_MISCONFIGURED: The Redis key "outboxer:test:\w+" holds a string, not a stream: XADD would fail with WRONGTYPE/,
        teardown: async () => void (await redis.del(key)),
      };
    },
  });

  describe(`redis-streams relay recovery (ioredis ${version})`, () => {
    test('fails at once while ioredis reconnects (nothing piles up in its offline queue), and delivers once it is back', async () => {
      const key = `outboxer:test:${random()}`;
      const proxy = await tcpProxy(6379);
      const client = proxiedClient(Client, proxy.port);
      const relay = redisStreamsRelay({ redis: client, stream: key, timeout: 1000 });
      try {
        await relay.start!();
        expect(await relay.deliver([envelope(1, 'a')], makeContext())).toEqual([{ ok: true }]);
        await proxy.cut();
        await waitFor(() => client.status === 'reconnecting', 5000, 'ioredis to notice the outage');
        for (let retry = 0; retry < 3; retry += 1) {
          const during = (await relay.deliver([envelope(2, 'a'), envelope(3, 'a')], makeContext())) as Array<
            DeliveryOutcome & { error?: Error }
          >;
          expect(String(during[0]!.error?.message)).toMatch(
            /Redis is unreachable \(the ioredis client is reconnecting\)/,
          );
          expect(during[1]).toEqual({ ok: false, error: SKIPPED });
        }
        await proxy.restore();
        await waitFor(() => client.status === 'ready', 5000, 'ioredis to reconnect');
        expect(await relay.deliver([envelope(2, 'a'), envelope(3, 'a')], makeContext())).toEqual([
          { ok: true },
          { ok: true },
        ]);
        // The failed attempts left no copies behind.
        expect((await readStream(key)).map((m) => m.id)).toEqual([1, 2, 3]);
      } finally {
        client.disconnect();
        await proxy.cut();
        await redis.del(key);
      }
    });

    test('a pipeline whose replies do not come within the timeout fails; ioredis may still run it later', async () => {
      const key = `outboxer:test:${random()}`;
      // A client that never connects (nothing listens on the port) queues commands until the timeout.
      const proxy = await tcpProxy(6379);
      await proxy.cut();
      const client = new Client({
        host: '127.0.0.1',
        port: proxy.port,
        lazyConnect: true,
        retryStrategy: () => 100,
      });
      client.on('error', () => undefined);
      const relay = redisStreamsRelay({ redis: client, stream: key, timeout: 300, checkStream: false });
      try {
        const [outcome] = (await relay.deliver([envelope(1, 'a')], makeContext())) as Array<
          DeliveryOutcome & { error?: Error }
        >;
        expect(String(outcome!.error?.message)).toMatch(/took longer than 300 ms/);
        // Once Redis is reachable, ioredis runs what it had queued: the "failed" message is added
        // after all (and will be added again by the retry: consumers deduplicate on the id field).
        await proxy.restore();
        await waitFor(async () => (await redis.xlen(key)) === 1, 5000, 'the queued XADD to run');
      } finally {
        client.disconnect();
        await proxy.cut();
        await redis.del(key);
      }
    });
  });
}
