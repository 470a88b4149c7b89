/**
 * The NATS JetStream receiver: one service relays order events to a stream, another consumes it
 * into an inbox and ships each order step once, although its first reader stops before its acks
 * reach the server, which delivers everything again once the ack wait is over. Both run in this
 * process, on one database, so that the example is self-contained.
 *
 * Needs PostgreSQL in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) and a NATS
 * server with JetStream in NATS_URL (default 127.0.0.1:4222).
 *
 *   npx tsx examples/receivers/nats.ts
 */
import { pathToFileURL } from 'node:url';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import pg from 'pg';
import { Outboxer, defineMessage } from 'outboxer';
import { natsReceiver, natsRelay, type JetStreamMessageLike } from 'outboxer/nats';
import { nodePostgres } from 'outboxer/pg';

const OrderStep = defineMessage<{ orderId: number; step: string }>({
  outbox: 'orders',
  type: 'order.step',
  groupKey: (event) => `order:${event.orderId}`,
});

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  const nc = await connect({ servers: process.env.NATS_URL ?? '127.0.0.1:4222' });
  const jsm = await jetstreamManager(nc);
  const stream = `ORDERS_${Date.now()}`;
  await jsm.streams.add({ name: stream, subjects: [`${stream}.>`] });
  // Explicit acks; a message not acked within 1 s is delivered again (the default is 30 s).
  await jsm.consumers.add(stream, {
    durable_name: 'shipping',
    ack_policy: AckPolicy.Explicit,
    ack_wait: 1e9,
  });
  const pool = new pg.Pool({ connectionString: databaseUrl });

  // The sending service: its outbox relays to the stream.
  const sender = new Outboxer({
    database: nodePostgres(pool),
    outboxes: {
      orders: {
        relay: natsRelay({ jetstream: jetstream(nc), createHeaders: headers, subject: `${stream}.orders` }),
      },
    },
  });
  // The receiving service: an inbox, and the receiver that feeds it.
  const shipping = new Outboxer({ database: nodePostgres(pool), inboxes: { shipping: {} } });
  const receive = natsReceiver({
    outboxer: shipping,
    inbox: 'shipping',
    transaction: (work) => inTransaction(pool, work), // the message is acked after this commits
    handler: async (message, client) => {
      const { orderId, step } = message.payload as { orderId: number; step: string };
      await client.query('INSERT INTO shipments (order_id, step) VALUES ($1, $2)', [orderId, step]);
      console.log(`${message.groupKey} #${message.id} ${step}: shipped`);
    },
  });
  /** Reads the shipping consumer until it has seen `count` messages; `lose` drops the acks. */
  async function consume(count: number, lose = false): Promise<void> {
    const messages = await (await jetstream(nc).consumers.get(stream, 'shipping')).consume();
    let seen = 0;
    for await (const message of messages) {
      const { subject, data } = message;
      const delivered: JetStreamMessageLike = lose
        ? { subject, data, headers: message.headers, ack: () => {}, nak: (delay) => message.nak(delay) }
        : message;
      const result = await receive(delivered);
      if (result.status === 'fulfilled' && result.value.duplicate)
        console.log(`#${result.value.id}: already handled, acked`);
      if (++seen === count) break;
    }
    await messages.close();
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

    await consume(2, true); // a first reader whose acks never leave it
    console.log('the acks were lost; the server delivers again:');
    await consume(2);

    const { rows } = await pool.query<{ steps: string }>(
      "SELECT string_agg(step, ', ' ORDER BY id) AS steps FROM shipments WHERE order_id = 1",
    );
    console.log(`order 1 shipped steps: ${rows[0]!.steps}`);
  } finally {
    await sender.stop();
    await shipping.stop();
    await jsm.streams.delete(stream).catch(() => undefined);
    await nc.close(); // the connection is yours: close it after outboxer.stop()
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
