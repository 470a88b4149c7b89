/**
 * outboxer → Apache Kafka through @platformatic/kafka, with the outbox in PostgreSQL through
 * node-postgres (`pg`).
 *
 * Needs PostgreSQL 13 or newer in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
 * and a Kafka broker in KAFKA_BROKERS (default 127.0.0.1:9092; in this repository:
 * `bash scripts/services/kafka.sh`). It creates a table `orders` if there is none (the README's
 * Quick start has the same one) and outboxer's own tables.
 *
 *   npx tsx examples/relays/kafka.ts
 */
import { pathToFileURL } from 'node:url';
import { Admin, Consumer, Producer, stringDeserializers } from '@platformatic/kafka';
import pg from 'pg';
import { Outboxer, defineMessage } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { kafkaRelay, platformaticProducer } from 'outboxer/kafka';

const OrderPlaced = defineMessage<{ orderId: number; total: number }>({
  outbox: 'orders',
  type: 'OrderPlaced',
  groupKey: (order) => `order:${order.orderId}`, // the Kafka key: one partition, in order, per order
});
const OrderPaid = defineMessage<{ orderId: number }>({
  outbox: 'orders',
  type: 'OrderPaid',
  groupKey: (order) => `order:${order.orderId}`,
});

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
  // The relay never creates topics. A fresh one per run: outbox ids restart at 1 in a new database.
  const topic = `outboxer-example-${Date.now()}`;
  const admin = new Admin({ clientId: 'outboxer-example', bootstrapBrokers: brokers });
  await admin.createTopics({ topics: [topic], partitions: 3, replicas: 1 });

  // Your producer: idempotent (acks -1, retries), no serializers (the relay sends Buffers).
  const producer = new Producer({
    clientId: 'outboxer-example',
    bootstrapBrokers: brokers,
    idempotent: true,
  });
  const pool = new pg.Pool({ connectionString: databaseUrl });
  const outboxer = new Outboxer({
    database: nodePostgres(pool),
    outboxes: {
      orders: { relay: kafkaRelay({ producer: platformaticProducer(producer), topic }), pollInterval: 100 },
    },
  });
  const consumer = new Consumer({
    groupId: `${topic}-reader`,
    clientId: 'outboxer-example',
    bootstrapBrokers: brokers,
    deserializers: stringDeserializers,
  });
  try {
    // Your own table, here for the example.
    await pool.query('CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY, status text)');
    await outboxer.migrate(); // or postgresSchemaSql() in your own migration tool
    await outboxer.start(); // checks the brokers and the topic: RELAY_MISCONFIGURED if either is missing

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

    // A consumer: the key is the group key; headers carry outboxer-id (deduplicate on it) and -type.
    const stream = await consumer.consume({
      topics: [topic],
      mode: 'earliest',
      autocommit: false,
      maxWaitTime: 200,
    });
    let read = 0;
    for await (const message of stream) {
      const headers = Object.fromEntries(message.headers) as Record<string, string>;
      console.log(`${message.key} #${headers['outboxer-id']} ${headers['outboxer-type']} ${message.value}`);
      if (++read === 2) break;
    }
    await stream.close();
  } finally {
    await outboxer.stop();
    await consumer.close();
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
