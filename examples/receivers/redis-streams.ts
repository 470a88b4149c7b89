/**
 * The Redis Streams receiver: one service relays order events to a stream, another reads it with
 * a consumer group into an inbox and ships each order step once, although its first worker dies
 * before its XACKs and a second worker claims what it left pending. Both run in this process, on
 * one database, so that the example is self-contained.
 *
 * Needs PostgreSQL in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) and Redis
 * in REDIS_URL (default redis://127.0.0.1:6379).
 *
 *   npx tsx examples/receivers/redis-streams.ts
 */
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import pg from 'pg';
import { Outboxer, defineMessage } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { redisStreamsReceiver, redisStreamsRelay, type RedisStreamEntry } from 'outboxer/redis-streams';

const OrderStep = defineMessage<{ orderId: number; step: string }>({
  outbox: 'orders',
  type: 'order.step',
  groupKey: (event) => `order:${event.orderId}`,
});

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  const stream = `orders:${Date.now()}`;
  await redis.xgroup('CREATE', stream, 'shipping', '0', 'MKSTREAM');
  const pool = new pg.Pool({ connectionString: databaseUrl });

  // The sending service: its outbox relays to the stream.
  const sender = new Outboxer({
    database: nodePostgres(pool),
    outboxes: { orders: { relay: redisStreamsRelay({ redis, stream }) } },
  });
  // The receiving service: an inbox, and the receiver that feeds it.
  const shipping = new Outboxer({ database: nodePostgres(pool), inboxes: { shipping: {} } });
  const options = {
    outboxer: shipping,
    inbox: 'shipping',
    redis,
    stream,
    group: 'shipping',
    transaction: <T>(work: (client: pg.PoolClient) => Promise<T>) => inTransaction(pool, work), // XACK after this commits
    handler: async (
      message: { id: string; groupKey: string | null; payload: unknown },
      client: pg.PoolClient,
    ) => {
      const { orderId, step } = message.payload as { orderId: number; step: string };
      await client.query('INSERT INTO shipments (order_id, step) VALUES ($1, $2)', [orderId, step]);
      console.log(`${message.groupKey} #${message.id} ${step}: shipped`);
    },
  };

  try {
    await pool.query('CREATE TABLE IF NOT EXISTS shipments (id serial PRIMARY KEY, order_id int, step text)');
    await sender.migrate();
    await shipping.migrate(); // creates the inbox table
    await sender.start();
    await inTransaction(pool, async (client) => {
      await sender.publish(client, OrderStep({ orderId: 1, step: 'placed' }));
      await sender.publish(client, OrderStep({ orderId: 1, step: 'paid' }));
    });
    while ((await sender.counts('orders')).pending > 0)
      await new Promise((resolve) => setTimeout(resolve, 50));

    // worker-1 reads and handles both entries, then dies before its XACKs reach Redis.
    const dying = redisStreamsReceiver({
      ...options,
      redis: { pipeline: () => ({ exec: async () => null }) },
    });
    const read = (await redis.xreadgroup(
      'GROUP',
      'shipping',
      'worker-1',
      'COUNT',
      10,
      'STREAMS',
      stream,
      '>',
    )) as Array<[string, RedisStreamEntry[]]> | null;
    for (const entry of read?.[0]?.[1] ?? []) await dying(entry);

    // worker-2 claims what worker-1 left pending (in production: entries idle for a while).
    console.log('worker-1 died before acking; worker-2 claims its entries:');
    const receive = redisStreamsReceiver(options);
    const [, claimed] = (await redis.xautoclaim(stream, 'shipping', 'worker-2', 0, '0', 'COUNT', 10)) as [
      string,
      RedisStreamEntry[],
    ];
    for (const entry of claimed) {
      const result = await receive(entry);
      if (result.status === 'fulfilled' && result.value.duplicate)
        console.log(`#${result.value.id}: already handled, acked`);
    }

    const { rows } = await pool.query<{ steps: string }>(
      "SELECT string_agg(step, ', ' ORDER BY id) AS steps FROM shipments WHERE order_id = 1",
    );
    console.log(`order 1 shipped steps: ${rows[0]!.steps}`);
  } finally {
    await sender.stop();
    await shipping.stop();
    await redis.del(stream);
    redis.disconnect(); // the client is yours: close it after outboxer.stop()
    await pool.end();
  }
}

/** Runs `work` in a transaction on a client of the pool: COMMIT if it returns, ROLLBACK if it throws. */
async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
