/**
 * outboxer → RabbitMQ, with the outbox in PostgreSQL through node-postgres (`pg`).
 *
 * Needs PostgreSQL 13 or newer in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 * and RabbitMQ in RABBITMQ_URL (default amqp://guest:guest@127.0.0.1:5672; in this repository:
 * `bash scripts/services/rabbitmq.sh`). It creates a table `orders` if there is none (the README's Quick start has the
 * same one) and outboxer's own tables.
 *
 *   npx tsx examples/relays/rabbitmq.ts
 */
import { pathToFileURL } from 'node:url';
import amqp from 'amqplib';
import pg from 'pg';
import { Outboxer, defineMessage } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { rabbitmqRelay } from 'outboxer/rabbitmq';

const OrderPlaced = defineMessage<{ orderId: number; total: number }>({
  outbox: 'orders',
  type: 'order.placed', // the AMQP `type` property, and here the routing key
  groupKey: (order) => `order:${order.orderId}`,
});
const OrderPaid = defineMessage<{ orderId: number }>({
  outbox: 'orders',
  type: 'order.paid',
  groupKey: (order) => `order:${order.orderId}`,
});

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  const url = process.env.RABBITMQ_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

  // The topology belongs to the application: an exchange, and a queue bound to it. (A real
  // consumer's queue is durable and named; this one lives as long as the example.)
  const consumer = await amqp.connect(url);
  const channel = await consumer.createChannel();
  await channel.assertExchange('shop', 'topic', { durable: true });
  const { queue } = await channel.assertQueue('', { exclusive: true });
  await channel.bindQueue(queue, 'shop', 'order.*');

  const pool = new pg.Pool({ connectionString: databaseUrl });
  const relay = rabbitmqRelay({
    // The relay connects in start(), reconnects after an outage, and closes it in stop().
    connection: () => amqp.connect(url),
    exchange: 'shop', // checked in start(): RELAY_MISCONFIGURED if it does not exist
    routingKey: (message) => message.type ?? 'order.unknown', // default: the group key
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

    // A consumer: message_id is the outbox id (deduplicate on it); the headers carry the rest.
    for (let read = 0, deadline = Date.now() + 5000; read < 2 && Date.now() < deadline;) {
      const message = await channel.get(queue, { noAck: true });
      if (message === false) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        continue;
      }
      read += 1;
      const { messageId, type, headers } = message.properties;
      console.log(
        `${String(headers?.['outboxer-group-key'])} #${messageId} ${type} ${message.content.toString()}`,
      );
    }
  } finally {
    await outboxer.stop();
    await channel.deleteExchange('shop').catch(() => undefined);
    await consumer.close();
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
