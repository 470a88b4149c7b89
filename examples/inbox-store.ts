/**
 * Store, then process in order: a consumer whose work is too slow to do while the broker waits
 * stores each delivery in its inbox and acknowledges at once; the inbox then processes the stored
 * messages per group in order, retrying a failure with backoff while the group's later messages
 * wait. A delivery that comes again is recognised and stored once.
 *
 * Needs PostgreSQL in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres).
 *
 *   npx tsx examples/inbox-store.ts
 */
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { Outboxer } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';

interface OrderStep {
  id: string; // the message's id at its source: with an outboxer producer, its `outboxer-id` header
  orderId: number;
  step: string;
}

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  const pool = new pg.Pool({ connectionString: databaseUrl });
  let carrierDown = true; // the carrier fails the first time it is called for a payment
  const outboxer = new Outboxer({
    database: nodePostgres(pool),
    inboxes: {
      shipping: {
        process: {
          // Each stored message is processed in a transaction of its own, with the inbox's record.
          transaction: (work) => inTransaction(pool, work),
          handler: async (message, client) => {
            const { orderId, step } = message.payload as OrderStep;
            if (step === 'paid' && carrierDown) {
              carrierDown = false;
              console.log(`${message.id} ${step}: the carrier is down; retried later`);
              throw new Error('carrier down'); // rolled back; retried with backoff, in order
            }
            await client.query('INSERT INTO shipments (order_id, step) VALUES ($1, $2)', [orderId, step]);
            console.log(`${message.id} ${step}: shipped`);
          },
          partitions: 2,
          pollInterval: 100,
          backoff: { min: 100, max: 1000 },
        },
      },
    },
  });
  try {
    await pool.query('CREATE TABLE IF NOT EXISTS shipments (id serial PRIMARY KEY, order_id int, step text)');
    await outboxer.migrate(); // the inbox table, and the outbox inbox:shipping stores into

    // What the consumer does with each delivery: store it, commit, acknowledge. Fast.
    async function onDelivery(delivery: OrderStep): Promise<void> {
      const outcome = await inTransaction(pool, (client) =>
        outboxer.inbox('shipping').store(client, {
          id: delivery.id,
          source: 'orders',
          groupKey: `order:${delivery.orderId}`, // processed in order per group
          payload: delivery,
        }),
      );
      console.log(`${delivery.id}: ${outcome.duplicate ? 'already stored, skipped' : 'stored'}`);
    }

    await onDelivery({ id: 'm-1', orderId: 1, step: 'placed' });
    await onDelivery({ id: 'm-2', orderId: 1, step: 'paid' });
    await onDelivery({ id: 'm-3', orderId: 1, step: 'packed' });
    await onDelivery({ id: 'm-1', orderId: 1, step: 'placed' }); // the broker delivers it again

    await outboxer.start(); // processes what was stored (on any node that runs start())
    while ((await outboxer.counts('inbox:shipping')).pending > 0)
      await new Promise((resolve) => setTimeout(resolve, 50));
    const { rows } = await pool.query<{ steps: string }>(
      "SELECT string_agg(step, ', ' ORDER BY id) AS steps FROM shipments WHERE order_id = 1",
    );
    console.log(`order 1 shipped steps: ${rows[0]!.steps}`);
  } finally {
    await outboxer.stop();
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
