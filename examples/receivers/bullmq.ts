/**
 * The BullMQ receiver: one service relays order events as jobs to a queue, another runs them with
 * a worker into an inbox and ships each order step once, although the same jobs are added again
 * after the first ones were completed and removed (what a redelivery of the relay's batch does).
 * Both run in this process, on one database, so that the example is self-contained.
 *
 * Needs PostgreSQL in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) and Redis
 * on REDIS_HOST:REDIS_PORT (default 127.0.0.1:6379).
 *
 *   npx tsx examples/receivers/bullmq.ts
 */
import { pathToFileURL } from 'node:url';
import { Queue, Worker, type Job } from 'bullmq';
import pg from 'pg';
import { Outboxer, defineMessage, type ReceiveOutcome } from 'outboxer';
import { bullmqReceiver, bullmqRelay } from 'outboxer/bullmq';
import { nodePostgres } from 'outboxer/pg';

const OrderStep = defineMessage<{ orderId: number; step: string }>({
  outbox: 'orders',
  type: 'order.step', // the job name
  groupKey: (event) => `order:${event.orderId}`,
});

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  const connection = {
    host: process.env.REDIS_HOST ?? '127.0.0.1',
    port: Number(process.env.REDIS_PORT ?? 6379),
  };
  const queue = new Queue(`orders-${Date.now()}`, { connection });
  const pool = new pg.Pool({ connectionString: databaseUrl });

  // The sending service: its outbox relays to the queue; completed jobs are removed.
  const sender = new Outboxer({
    database: nodePostgres(pool),
    outboxes: { orders: { relay: bullmqRelay({ queue, jobOptions: { removeOnComplete: true } }) } },
  });
  // The receiving service: an inbox, and a worker whose processor is the receiver.
  const shipping = new Outboxer({ database: nodePostgres(pool), inboxes: { shipping: {} } });
  const receive = bullmqReceiver({
    outboxer: shipping,
    inbox: 'shipping',
    transaction: (work) => inTransaction(pool, work), // BullMQ completes the job after this commits
    handler: async (message, client) => {
      const { orderId, step } = message.payload as { orderId: number; step: string };
      await client.query('INSERT INTO shipments (order_id, step) VALUES ($1, $2)', [orderId, step]);
      console.log(`${message.groupKey} #${message.id} ${step}: shipped`);
    },
  });
  const ran: Job[] = [];
  let completed = 0;
  // One worker at concurrency 1: jobs run in the order they were added.
  const worker = new Worker(queue.name, receive, { connection, concurrency: 1 });
  worker.on('completed', (job: Job, outcome: ReceiveOutcome) => {
    ran.push(job);
    completed += 1;
    if (outcome.duplicate) console.log(`#${outcome.id}: already handled, completed`);
  });
  const until = async (count: number) => {
    while (completed < count) await new Promise((resolve) => setTimeout(resolve, 50));
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
    await until(2);

    console.log('the same jobs are added again:');
    await queue.addBulk(ran.map((job) => ({ name: job.name, data: job.data, opts: { jobId: job.id! } })));
    await until(4);

    const { rows } = await pool.query<{ steps: string }>(
      "SELECT string_agg(step, ', ' ORDER BY id) AS steps FROM shipments WHERE order_id = 1",
    );
    console.log(`order 1 shipped steps: ${rows[0]!.steps}`);
  } finally {
    await sender.stop();
    await shipping.stop();
    await worker.close();
    await queue.obliterate({ force: true });
    await queue.close(); // the queue is yours: close it after outboxer.stop()
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
