/**
 * outboxer → NATS JetStream, with SQLite (better-sqlite3) as the database.
 *
 * Needs nats-server with JetStream on 127.0.0.1:4222 (`bash scripts/services/nats.sh`), or set
 * NATS_URL.
 *
 *   npx tsx examples/relays/nats.ts
 */
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { connect, headers } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Outboxer, defineMessage } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
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

export async function main(): Promise<void> {
  // Keep reconnecting through outages of any length (the client's default gives up after 10 tries).
  const nc = await connect({ servers: process.env.NATS_URL ?? '127.0.0.1:4222', maxReconnectAttempts: -1 });
  const js = jetstream(nc);
  // A fresh stream per run: outbox ids restart at 1 in a new database, and a stream drops a
  // Nats-Msg-Id it stored within its duplicate window (2 minutes by default).
  const run = Date.now().toString(36);
  const manager = await jetstreamManager(nc);
  await manager.streams.add({ name: `SHOP_${run}`, subjects: [`shop.${run}.>`] });

  const db = new Database(':memory:');
  db.exec(
    'CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL, paid INTEGER NOT NULL DEFAULT 0)',
  );
  const relay = natsRelay({
    jetstream: js,
    createHeaders: headers, // outboxer imports nothing from the NATS packages
    subject: (message) => `shop.${run}.orders.${message.type}`,
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
    db.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
