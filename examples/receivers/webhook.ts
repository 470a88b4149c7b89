/**
 * The webhook receiver: one service relays order events as signed webhooks, another receives them
 * into an inbox and records each order step once, although the network loses the first answer
 * and the relay sends that webhook again. Both run in this process, on one database, so that the
 * example is self-contained; in real life they are two services with a database each.
 *
 * Needs PostgreSQL in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres).
 *
 *   npx tsx examples/receivers/webhook.ts
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { Outboxer, defineMessage } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { nodeWebhookReceiver, webhookReceiver, webhookRelay, type WebhookFetch } from 'outboxer/webhook';

const OrderStep = defineMessage<{ orderId: number; step: string }>({
  outbox: 'orders',
  type: 'order.step',
  groupKey: (event) => `order:${event.orderId}`,
});

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  const secret = process.env.WEBHOOK_SECRET ?? `whsec_${randomBytes(32).toString('base64')}`;
  const pool = new pg.Pool({ connectionString: databaseUrl });

  // The receiving service: an inbox, and the webhook receiver in front of it.
  const consumer = new Outboxer({ database: nodePostgres(pool), inboxes: { 'order-events': {} } });
  await pool.query('CREATE TABLE IF NOT EXISTS order_steps (id serial PRIMARY KEY, order_id int, step text)');
  await consumer.migrate(); // creates the inbox table
  const receiver = webhookReceiver({
    outboxer: consumer,
    inbox: 'order-events',
    secret,
    // Each webhook is handled in a transaction of its own; the 2xx is sent after it committed.
    transaction: (work) => inTransaction(pool, work),
    handler: async (webhook, client) => {
      const { data } = webhook.body as { data: { orderId: number; step: string } };
      await client.query('INSERT INTO order_steps (order_id, step) VALUES ($1, $2)', [
        data.orderId,
        data.step,
      ]);
      console.log(`${webhook.groupKey} #${webhook.id} order.${data.step}: recorded`);
    },
  });
  const server = createServer(nodeWebhookReceiver(receiver)); // Express: app.post(path, expressWebhookReceiver(receiver))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks/orders`;

  // The sending service's network loses the answer to the first request: the relay cannot know
  // the webhook was handled, and sends it again.
  let requests = 0;
  const lossy: WebhookFetch = async (target, init) => {
    const response = await fetch(target, init);
    if (++requests === 1) throw new Error('connection reset');
    const answer = response.status === 200 ? ` ${await response.clone().text()}` : '';
    console.log(`#${init.headers['webhook-id']} answered ${response.status}${answer}`);
    return response;
  };
  const producer = new Outboxer({
    database: nodePostgres(pool),
    outboxes: {
      orders: {
        relay: webhookRelay({ url, secret, fetch: lossy }),
        pollInterval: 100,
        backoff: { min: 100 },
      },
    },
  });
  try {
    await producer.migrate();
    await producer.start();
    await inTransaction(pool, async (client) => {
      await producer.publish(client, OrderStep({ orderId: 1, step: 'placed' }));
      await producer.publish(client, OrderStep({ orderId: 1, step: 'paid' }));
    });

    const deadline = Date.now() + 30_000;
    while ((await producer.counts('orders')).pending > 0) {
      if (Date.now() > deadline) throw new Error('the webhooks were not delivered within 30 s');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const { rows } = await pool.query<{ steps: string }>(
      "SELECT string_agg(step, ', ' ORDER BY id) AS steps FROM order_steps WHERE order_id = 1",
    );
    console.log(`${requests} requests, order 1 steps: ${rows[0]!.steps}`);
  } finally {
    await producer.stop();
    await consumer.stop();
    await new Promise((resolve) => server.close(resolve));
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
