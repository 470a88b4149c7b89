/**
 * outboxer → HTTP webhooks (Standard Webhooks signatures), with the outbox in PostgreSQL through
 * node-postgres (`pg`). The receiver runs in the same process here so that the example is
 * self-contained; in real life it is someone else's service, and it verifies requests the same way.
 *
 * Needs PostgreSQL 13 or newer in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres);
 * WEBHOOK_SECRET is optional (a random secret by default). It creates a table `orders` if there is none (the README's Quick start has the
 * same one) and outboxer's own tables.
 *
 *   npx tsx examples/relays/webhook.ts
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { Outboxer, defineMessage } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { verifyWebhook, webhookRelay, WebhookVerificationError } from 'outboxer/webhook';

const OrderPlaced = defineMessage<{ orderId: number; total: number }>({
  outbox: 'orders',
  type: 'order.placed',
  groupKey: (order) => `order:${order.orderId}`, // one order's webhooks arrive in order
});
const OrderPaid = defineMessage<{ orderId: number }>({
  outbox: 'orders',
  type: 'order.paid',
  groupKey: (order) => `order:${order.orderId}`,
});

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  // Shared with the receiver once, out of band. Keep it in your secret store, not in code.
  const secret = process.env.WEBHOOK_SECRET ?? `whsec_${randomBytes(32).toString('base64')}`;

  // The receiver: verifies the signature over the raw body, then deduplicates on webhook-id
  // (the outbox id: a retry after a lost response carries the same one).
  const seen = new Set<string>();
  const receiver = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    try {
      const { id } = verifyWebhook(secret, req.headers, body);
      if (!seen.has(id)) {
        seen.add(id);
        const event = JSON.parse(body.toString('utf8')) as { type: string; data: unknown };
        console.log(
          `${String(req.headers['outboxer-group-key'])} #${id} ${event.type} ${JSON.stringify(event.data)}`,
        );
      }
      res.writeHead(204).end();
    } catch (error) {
      res.writeHead(error instanceof WebhookVerificationError ? 401 : 500).end();
    }
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks/orders`;

  const pool = new pg.Pool({ connectionString: databaseUrl });
  const outboxer = new Outboxer({
    database: nodePostgres(pool),
    outboxes: {
      // A small batch: the requests of a batch must finish within the partition lease (30 s).
      orders: { relay: webhookRelay({ url, secret, timeout: 5000 }), batchSize: 20, pollInterval: 100 },
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

    const deadline = Date.now() + 30_000;
    while ((await outboxer.counts('orders')).pending > 0) {
      if (Date.now() > deadline) throw new Error('the webhooks were not delivered within 30 s');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    await outboxer.stop();
    await pool.end();
    await new Promise((resolve) => receiver.close(resolve));
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

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
