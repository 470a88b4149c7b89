/**
 * The pg-boss receiver: one service relays order events as jobs to a pg-boss queue, another works
 * them into an inbox and ships each order step once, although the second job fails once and
 * pg-boss retries the whole batch, the first job with it. Both run in this process, on one
 * database, so that the example is self-contained.
 *
 * Needs PostgreSQL in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres).
 *
 *   npx tsx examples/receivers/pg-boss.ts
 */
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { Outboxer, defineMessage } from 'outboxer';
import { pgBossReceiver, pgBossRelay } from 'outboxer/pg-boss';
import { nodePostgres } from 'outboxer/pg';

const OrderStep = defineMessage<{ orderId: number; step: string }>({
  outbox: 'orders',
  type: 'order.step',
  groupKey: (event) => `order:${event.orderId}`,
});

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  const boss = new PgBoss({ connectionString: databaseUrl, supervise: false, schedule: false });
  boss.on('error', (error) => console.error(error));
  await boss.start();
  const queue = `orders_${Date.now()}`;
  await boss.createQueue(queue, { retryLimit: 3, retryDelay: 1 });
  const pool = new pg.Pool({ connectionString: databaseUrl });

  // The sending service: its outbox relays to the queue.
  const sender = new Outboxer({
    database: nodePostgres(pool),
    outboxes: { orders: { relay: pgBossRelay({ boss, queue }) } },
  });
  // The receiving service: an inbox, and the receiver as the queue's work handler. The carrier
  // is down the first time the second step ships.
  const shipping = new Outboxer({ database: nodePostgres(pool), inboxes: { shipping: {} } });
  let carrierDown = true;
  const receive = pgBossReceiver({
    outboxer: shipping,
    inbox: 'shipping',
    transaction: (work) => inTransaction(pool, work), // pg-boss completes the jobs after these commit
    handler: async (message, client) => {
      const { orderId, step } = message.payload as { orderId: number; step: string };
      if (step === 'paid' && carrierDown) {
        carrierDown = false;
        console.log(`#${message.id} ${step}: the carrier is down; pg-boss retries the batch`);
        throw new Error('carrier down');
      }
      await client.query('INSERT INTO shipments (order_id, step) VALUES ($1, $2)', [orderId, step]);
      console.log(`${message.groupKey} #${message.id} ${step}: shipped`);
    },
  });
  let completed = 0;

  try {
    await pool.query('CREATE TABLE IF NOT EXISTS shipments (id serial PRIMARY KEY, order_id int, step text)');
    await sender.migrate();
    await shipping.migrate(); // creates the inbox table
    await inTransaction(pool, async (client) => {
      await sender.publish(client, OrderStep({ orderId: 1, step: 'placed' }));
      await sender.publish(client, OrderStep({ orderId: 1, step: 'paid' }));
    });
    await sender.start();
    while ((await sender.counts('orders')).pending > 0)
      await new Promise((resolve) => setTimeout(resolve, 50));

    await boss.work(queue, { batchSize: 10, pollingIntervalSeconds: 0.5 }, async (jobs) => {
      const outcomes = await receive(jobs);
      for (const outcome of outcomes) if (outcome.duplicate) console.log(`#${outcome.id}: already handled`);
      completed += outcomes.length;
      return outcomes;
    });
    while (completed < 2) await new Promise((resolve) => setTimeout(resolve, 50));

    const { rows } = await pool.query<{ steps: string }>(
      "SELECT string_agg(step, ', ' ORDER BY id) AS steps FROM shipments WHERE order_id = 1",
    );
    console.log(`order 1 shipped steps: ${rows[0]!.steps}`);
  } finally {
    await sender.stop();
    await shipping.stop();
    await boss.stop({ graceful: false }); // pg-boss is yours: stop it after outboxer.stop()
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
