/**
 * outboxer → Redis Streams, with the outbox in PostgreSQL through node-postgres (`pg`).
 *
 * Needs PostgreSQL 13 or newer in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 * and Redis in REDIS_URL (default redis://127.0.0.1:6379; in this repository:
 * `bash scripts/services/redis.sh`). It creates a table `orders` if there is none (the README's Quick start has the
 * same one) and outboxer's own tables.
 *
 *   npx tsx examples/relays/redis-streams.ts
 */
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import pg from 'pg';
import { Outboxer, defineMessage } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { redisStreamsRelay } from 'outboxer/redis-streams';

const OrderPlaced = defineMessage<{ orderId: number; total: number }>({
  outbox: 'orders',
  type: 'OrderPlaced',
  groupKey: (order) => `order:${order.orderId}`,
});
const OrderPaid = defineMessage<{ orderId: number }>({
  outbox: 'orders',
  type: 'OrderPaid',
  groupKey: (order) => `order:${order.orderId}`,
});

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  const stream = `shop:orders:${Date.now().toString(36)}`; // a fresh stream for each run of the example

  const pool = new pg.Pool({ connectionString: databaseUrl });
  const outboxer = new Outboxer({
    database: nodePostgres(pool),
    outboxes: {
      orders: { relay: redisStreamsRelay({ redis, stream, maxLength: 100_000 }), pollInterval: 100 },
    },
  });
  try {
    // Your own table, here for the example.
    await pool.query('CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY, status text)');
    await outboxer.migrate(); // or postgresSchemaSql() in your own migration tool
    await outboxer.start();

    // The business write and the message commit together, or neither does.
    await inTransaction(pool, async (client) => {
      await client.query(
        `INSERT INTO orders VALUES (1, 'placed') ON CONFLICT (id) DO UPDATE SET status = 'placed'`,
      );
      await outboxer.publish(client, OrderPlaced({ orderId: 1, total: 4200 }));
    });
    await inTransaction(pool, async (client) => {
      await client.query(`UPDATE orders SET status = 'paid' WHERE id = 1`);
      await outboxer.publish(client, OrderPaid({ orderId: 1 }));
    });

    while ((await outboxer.counts('orders')).pending > 0)
      await new Promise((resolve) => setTimeout(resolve, 50));
    await outboxer.stop();

    // A consumer: each entry has the fields id, outbox, type, groupKey, payload and headers.
    // Redis does not deduplicate: a consumer skips an `id` it has already processed.
    for (const [, flat] of await redis.xrange(stream, '-', '+')) {
      const fields = new Map<string, string>();
      for (let i = 0; i < flat.length; i += 2) fields.set(flat[i]!, flat[i + 1]!);
      console.log(
        `${fields.get('groupKey')} #${fields.get('id')} ${fields.get('type')} ${fields.get('payload')}`,
      );
    }
  } finally {
    await outboxer.stop();
    await redis.del(stream);
    await redis.quit();
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
