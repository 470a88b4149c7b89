/**
 * The Kafka receiver: one service relays order events to a topic, another consumes them into an
 * inbox and ships each order step once, although its consumer group reads the topic a second time
 * (its offsets were reset, as after a restore or a redeploy with a new position). Both run in this
 * process, on one database, so that the example is self-contained.
 *
 * Needs PostgreSQL in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) and a
 * Kafka broker in KAFKA_BROKERS (default 127.0.0.1:9092; in this repository:
 * `bash scripts/services/kafka.sh`).
 *
 *   npx tsx examples/receivers/kafka.ts
 */
import { pathToFileURL } from 'node:url';
import { Admin, Consumer, Producer } from '@platformatic/kafka';
import pg from 'pg';
import { Outboxer, defineMessage } from 'outboxer';
import { kafkaRelay, platformaticProducer, platformaticReceiver } from 'outboxer/kafka';
import { nodePostgres } from 'outboxer/pg';

const OrderStep = defineMessage<{ orderId: number; step: string }>({
  outbox: 'orders',
  type: 'order.step',
  groupKey: (event) => `order:${event.orderId}`,
});

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
  const topic = `outboxer-receiver-example-${Date.now()}`;
  const group = `${topic}-shipping`;
  const admin = new Admin({ clientId: 'outboxer-example', bootstrapBrokers: brokers });
  await admin.createTopics({ topics: [topic], partitions: 3, replicas: 1 });
  const producer = new Producer({
    clientId: 'outboxer-example',
    bootstrapBrokers: brokers,
    idempotent: true,
  });
  const pool = new pg.Pool({ connectionString: databaseUrl });

  // The sending service: its outbox relays to the topic.
  const sender = new Outboxer({
    database: nodePostgres(pool),
    outboxes: { orders: { relay: kafkaRelay({ producer: platformaticProducer(producer), topic }) } },
  });
  // The receiving service: an inbox, and the receiver that feeds it.
  const shipping = new Outboxer({ database: nodePostgres(pool), inboxes: { shipping: {} } });
  const receive = platformaticReceiver({
    outboxer: shipping,
    inbox: 'shipping',
    transaction: (work) => inTransaction(pool, work), // the offset is committed after this commits
    handler: async (message, client) => {
      const { orderId, step } = message.payload as { orderId: number; step: string };
      await client.query('INSERT INTO shipments (order_id, step) VALUES ($1, $2)', [orderId, step]);
      console.log(`${message.groupKey} #${message.id} ${step}: shipped`);
    },
  });

  /** Reads the topic with the shipping group until it has seen `count` records. */
  async function consume(count: number): Promise<void> {
    const consumer = new Consumer({
      groupId: group,
      clientId: 'outboxer-example',
      bootstrapBrokers: brokers,
    });
    // autocommit: false, so that only the receiver commits, after the transaction.
    const stream = await consumer.consume({
      topics: [topic],
      mode: 'committed',
      fallbackMode: 'earliest',
      autocommit: false,
      maxWaitTime: 200,
    });
    let seen = 0;
    for await (const message of stream) {
      const outcome = await receive(message);
      if (outcome.duplicate) console.log(`#${outcome.id}: already handled, skipped`);
      if (++seen === count) break;
    }
    await stream.close();
    await consumer.close();
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

    await consume(2);
    // The group's offsets go back to the start: every record is delivered again.
    await admin.alterConsumerGroupOffsets({
      groupId: group,
      topics: [{ name: topic, partitionOffsets: [0, 1, 2].map((partition) => ({ partition, offset: 0n })) }],
    });
    console.log('the topic read again from the start:');
    await consume(2);

    const { rows } = await pool.query<{ steps: string }>(
      "SELECT string_agg(step, ', ' ORDER BY id) AS steps FROM shipments WHERE order_id = 1",
    );
    console.log(`order 1 shipped steps: ${rows[0]!.steps}`);
  } finally {
    await sender.stop();
    await shipping.stop();
    await producer.close(); // the producer is yours: close it after outboxer.stop()
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.close();
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
