/**
 * outboxer → Apache Kafka through @platformatic/kafka, with SQLite (better-sqlite3) as the database.
 *
 * Needs a Kafka broker on 127.0.0.1:9092 (`bash scripts/services/kafka.sh`), or set KAFKA_BROKERS.
 *
 *   npx tsx examples/relays/kafka.ts
 */
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { Admin, Consumer, Producer, stringDeserializers } from '@platformatic/kafka';
import { Outboxer, defineMessage } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
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

export async function main(): Promise<void> {
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
  const db = new Database(':memory:');
  db.exec(
    'CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL, paid INTEGER NOT NULL DEFAULT 0)',
  );
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
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
    await outboxer.migrate();
    await outboxer.start(); // checks the brokers and the topic: RELAY_MISCONFIGURED if either is missing

    // The business write and the message commit together, or neither does.
    db.transaction(() => {
      db.prepare('INSERT INTO orders (id, total) VALUES (?, ?)').run(1, 4200);
      outboxer.publish(db, OrderPlaced({ orderId: 1, total: 4200 }));
    })();
    db.transaction(() => {
      db.prepare('UPDATE orders SET paid = 1 WHERE id = ?').run(1);
      outboxer.publish(db, OrderPaid({ orderId: 1 }));
    })();

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
    db.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
