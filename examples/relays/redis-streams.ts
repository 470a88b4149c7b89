/**
 * outboxer → Redis Streams, with SQLite (better-sqlite3) as the database.
 *
 * Needs Redis on 127.0.0.1:6379 (`bash scripts/services/redis.sh`), or set REDIS_URL.
 *
 *   npx tsx examples/relays/redis-streams.ts
 */
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { Redis } from 'ioredis';
import { Outboxer, defineMessage } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { redisStreamsRelay } from 'outboxer/redis-streams';

const OrderPlaced = defineMessage<{ orderId: number; total: number }>({
  outbox: 'orders',
  type: 'OrderPlaced',
  groupKey: (order) => `order:${order.orderId}`,
});
const OrderPaid = defineMessage<{ orderId: number }>({
  outbox: 'orders',
  type: 'OrderPaid',
  groupKey: (order) => `order:${order.orderId}`,
});

export async function main(): Promise<void> {
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  const stream = `shop:orders:${Date.now().toString(36)}`; // a fresh stream for each run of the example

  const db = new Database(':memory:');
  db.exec(
    'CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL, paid INTEGER NOT NULL DEFAULT 0)',
  );
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
    outboxes: {
      orders: { relay: redisStreamsRelay({ redis, stream, maxLength: 100_000 }), pollInterval: 100 },
    },
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

    // A consumer: each entry has the fields id, outbox, type, groupKey, payload and headers.
    // Redis does not deduplicate: a consumer skips an `id` it has already processed.
    for (const [, flat] of await redis.xrange(stream, '-', '+')) {
      const fields = new Map<string, string>();
      for (let i = 0; i < flat.length; i += 2) fields.set(flat[i]!, flat[i + 1]!);
      console.log(
        `${fields.get('groupKey')} #${fields.get('id')} ${fields.get('type')} ${fields.get('payload')}`,
      );
    }
  } finally {
    await outboxer.stop();
    await redis.del(stream);
    await redis.quit();
    db.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
