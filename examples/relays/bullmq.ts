/**
 * outboxer → BullMQ, with the outbox in PostgreSQL through node-postgres (`pg`).
 *
 * Needs PostgreSQL 13 or newer in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 * and Redis in REDIS_URL (default redis://127.0.0.1:6379; in this repository:
 * `bash scripts/services/redis.sh`). It creates a table `orders` if there is none (the README's Quick
 * start has the same one) and outboxer's own tables.
 *
 *   npx tsx examples/relays/bullmq.ts
 */
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { Queue, Worker } from 'bullmq';
import pg from 'pg';
import { Outboxer, defineMessage } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { bullmqRelay, type BullmqJobData } from 'outboxer/bullmq';

const OrderPlaced = defineMessage<{ orderId: number; total: number }>({
  outbox: 'orders',
  type: 'OrderPlaced', // the job name
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
  const redis = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  const connection = { host: redis.hostname, port: Number(redis.port || 6379) };
  // A fresh queue per run: BullMQ ignores a job id it still holds, and outbox ids start again at 1
  // in a new database. Completed jobs are kept for an hour, which is how long a redelivery is ignored.
  const queue = new Queue(`outboxer-example-${randomUUID()}`, {
    connection,
    defaultJobOptions: { removeOnComplete: { age: 3600 } },
  });

  // The consumer: one worker at concurrency 1 runs jobs in the order they were added.
  let handled = 0;
  const worker = new Worker<BullmqJobData>(
    queue.name,
    async (job) => {
      const { payload, headers } = job.data; // headers: outboxer-id (deduplicate on it), -type, -group-key
      console.log(
        `${headers['outboxer-group-key']} #${headers['outboxer-id']} ${job.name} ${JSON.stringify(payload)}`,
      );
      handled += 1;
    },
    { connection, concurrency: 1 },
  );

  const pool = new pg.Pool({ connectionString: databaseUrl });
  const outboxer = new Outboxer({
    database: nodePostgres(pool),
    outboxes: { orders: { relay: bullmqRelay({ queue }), pollInterval: 100 } },
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

    const deadline = Date.now() + 30_000;
    while (handled < 2) {
      if (Date.now() > deadline) throw new Error('the jobs did not run within 30 s');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    await outboxer.stop();
    await worker.close();
    await queue.obliterate({ force: true });
    await queue.close();
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
