/**
 * The RabbitMQ receiver: one service relays order events to an exchange, another consumes its
 * queue into an inbox and ships each order step once, although its first consumer stops before
 * its acks reach the broker, which then delivers everything again. Both run in this process, on
 * one database, so that the example is self-contained.
 *
 * Needs PostgreSQL in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) and
 * RabbitMQ in AMQP_URL (default amqp://guest:guest@127.0.0.1:5672).
 *
 *   npx tsx examples/receivers/rabbitmq.ts
 */
import { pathToFileURL } from 'node:url';
import amqp, { type Channel } from 'amqplib';
import pg from 'pg';
import { Outboxer, defineMessage } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { rabbitmqReceiver, rabbitmqRelay, type AmqpConsumeChannelLike } from 'outboxer/rabbitmq';

const OrderStep = defineMessage<{ orderId: number; step: string }>({
  outbox: 'orders',
  type: 'order.step',
  groupKey: (event) => `order:${event.orderId}`, // the routing key
});

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  const connection = await amqp.connect(process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672');
  const exchange = `outboxer-receiver-example-${Date.now()}`;
  const queue = `${exchange}.shipping`;
  const setup = await connection.createChannel();
  await setup.assertExchange(exchange, 'topic', { durable: false });
  await setup.assertQueue(queue, { durable: false });
  await setup.bindQueue(queue, exchange, '#');
  const pool = new pg.Pool({ connectionString: databaseUrl });

  // The sending service: its outbox relays to the exchange.
  const sender = new Outboxer({
    database: nodePostgres(pool),
    outboxes: { orders: { relay: rabbitmqRelay({ connection, exchange }) } },
  });
  // The receiving service: an inbox, and a consumer of the queue through the receiver.
  const shipping = new Outboxer({ database: nodePostgres(pool), inboxes: { shipping: {} } });
  async function consume(
    channel: Channel,
    until: number,
    acks: AmqpConsumeChannelLike = channel,
  ): Promise<void> {
    let seen = 0;
    const receive = rabbitmqReceiver({
      outboxer: shipping,
      inbox: 'shipping',
      channel: acks, // where the acks go: the channel the queue is consumed on
      transaction: (work) => inTransaction(pool, work), // the delivery is acked after this commits
      handler: async (message, client) => {
        const { orderId, step } = message.payload as { orderId: number; step: string };
        await client.query('INSERT INTO shipments (order_id, step) VALUES ($1, $2)', [orderId, step]);
        console.log(`${message.groupKey} #${message.id} ${step}: shipped`);
      },
    });
    await new Promise<void>((resolve) => {
      void channel.consume(queue, async (delivery) => {
        const result = await receive(delivery);
        if (result?.status === 'fulfilled' && result.value.duplicate)
          console.log(`#${result.value.id}: already handled, acked`);
        if (++seen === until) resolve();
      });
    });
  }

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

    // A first consumer whose acks never leave it: it stops (its channel closes) before sending them.
    const first = await connection.createChannel();
    await consume(first, 2, { ack: () => undefined, nack: () => undefined });
    await first.close();
    console.log('the consumer stopped before acking; the broker delivers again:');
    const second = await connection.createChannel();
    await consume(second, 2);
    await second.close();

    const { rows } = await pool.query<{ steps: string }>(
      "SELECT string_agg(step, ', ' ORDER BY id) AS steps FROM shipments WHERE order_id = 1",
    );
    console.log(`order 1 shipped steps: ${rows[0]!.steps}`);
  } finally {
    await sender.stop();
    await shipping.stop();
    await setup.deleteQueue(queue).catch(() => undefined);
    await setup.deleteExchange(exchange).catch(() => undefined);
    await connection.close(); // the connection is yours: close it after outboxer.stop()
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
