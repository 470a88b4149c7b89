/**
 * outboxer → RabbitMQ, with SQLite (better-sqlite3) as the database.
 *
 * Needs RabbitMQ on 127.0.0.1:5672 with guest/guest (`bash scripts/services/rabbitmq.sh`), or set
 * RABBITMQ_URL.
 *
 *   npx tsx examples/relays/rabbitmq.ts
 */
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import amqp from 'amqplib';
import { Outboxer, defineMessage } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
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

export async function main(): Promise<void> {
  const url = process.env.RABBITMQ_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

  // The topology belongs to the application: an exchange, and a queue bound to it. (A real
  // consumer's queue is durable and named; this one lives as long as the example.)
  const consumer = await amqp.connect(url);
  const channel = await consumer.createChannel();
  await channel.assertExchange('shop', 'topic', { durable: true });
  const { queue } = await channel.assertQueue('', { exclusive: true });
  await channel.bindQueue(queue, 'shop', 'order.*');

  const db = new Database(':memory:');
  db.exec(
    'CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL, paid INTEGER NOT NULL DEFAULT 0)',
  );
  const relay = rabbitmqRelay({
    // The relay connects in start(), reconnects after an outage, and closes it in stop().
    connection: () => amqp.connect(url),
    exchange: 'shop', // checked in start(): RELAY_MISCONFIGURED if it does not exist
    routingKey: (message) => message.type ?? 'order.unknown', // default: the group key
  });
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
    outboxes: { orders: { relay, pollInterval: 100 } },
  });
  try {
    await outboxer.migrate();
    await outboxer.start();

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
    db.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
