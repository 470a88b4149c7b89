/**
 * outboxer → NATS JetStream, with the outbox in PostgreSQL through node-postgres (`pg`).
 *
 * Needs PostgreSQL 13 or newer in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 * and nats-server with JetStream in NATS_URL (default 127.0.0.1:4222; in this repository:
 * `bash scripts/services/nats.sh`). It creates a table `orders` if there is none (the README's Quick start has the
 * same one) and outboxer's own tables.
 *
 *   npx tsx examples/relays/nats.ts
 */
import { pathToFileURL } from 'node:url';
import { connect, headers } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import pg from 'pg';
import { Outboxer, defineMessage } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { natsRelay } from 'outboxer/nats';

const OrderPlaced = defineMessage<{ orderId: number; total: number }>({
  outbox: 'orders',
  type: 'placed',
  groupKey: (order) => `order:${order.orderId}`,
});
const OrderPaid = defineMessage<{ orderId: number }>({
  outbox: 'orders',
  type: 'paid',
  groupKey: (order) => `order:${order.orderId}`,
});

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  // Keep reconnecting through outages of any length (the client's default gives up after 10 tries).
  const nc = await connect({ servers: process.env.NATS_URL ?? '127.0.0.1:4222', maxReconnectAttempts: -1 });
  const js = jetstream(nc);
  // A fresh stream per run: outbox ids restart at 1 in a new database, and a stream drops a
  // Nats-Msg-Id it stored within its duplicate window (2 minutes by default).
  const run = Date.now().toString(36);
  const manager = await jetstreamManager(nc);
  await manager.streams.add({ name: `SHOP_${run}`, subjects: [`shop.${run}.>`] });

  const pool = new pg.Pool({ connectionString: databaseUrl });
  const relay = natsRelay({
    jetstream: js,
    createHeaders: headers, // outboxer imports nothing from the NATS packages
    subject: (message) => `shop.${run}.orders.${message.type}`,
  });
  const outboxer = new Outboxer({
    database: nodePostgres(pool),
    outboxes: { orders: { relay, pollInterval: 100 } },
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

    // A consumer (an ordered one, reading the stream from the start): Nats-Msg-Id is the outbox id.
    const consumer = await js.consumers.get(`SHOP_${run}`);
    for await (const message of await consumer.fetch({ max_messages: 2, expires: 5000 })) {
      const header = (name: string) => message.headers?.get(name);
      console.log(
        `${header('outboxer-group-key')} #${header('Nats-Msg-Id')} ${header('outboxer-type')} ${message.string()}`,
      );
    }
  } finally {
    await outboxer.stop();
    await manager.streams.delete(`SHOP_${run}`).catch(() => undefined);
    await nc.close();
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
