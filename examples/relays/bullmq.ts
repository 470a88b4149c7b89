/**
 * outboxer → BullMQ, with SQLite (better-sqlite3) as the database.
 *
 * Needs Redis on 127.0.0.1:6379 (`bash scripts/services/redis.sh`), or set REDIS_URL.
 *
 *   npx tsx examples/relays/bullmq.ts
 */
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { Queue, Worker } from 'bullmq';
import { Outboxer, defineMessage } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { bullmqRelay, type BullmqJobData } from 'outboxer/bullmq';

const OrderPlaced = defineMessage<{ orderId: number; total: number }>({
  outbox: 'orders',
  type: 'OrderPlaced', // the job name
  groupKey: (order) => `order:${order.orderId}`,
});
const OrderPaid = defineMessage<{ orderId: number }>({
  outbox: 'orders',
  type: 'OrderPaid',
  groupKey: (order) => `order:${order.orderId}`,
});

export async function main(): Promise<void> {
  const redis = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  const connection = { host: redis.hostname, port: Number(redis.port || 6379) };
  // A fresh queue per run: outbox ids restart at 1 in a new database, and BullMQ ignores a job id
  // it still holds. Completed jobs are kept for an hour, which is how long a redelivery is ignored.
  const queue = new Queue(`outboxer-example-${randomUUID()}`, {
    connection,
    defaultJobOptions: { removeOnComplete: { age: 3600 } },
  });

  // The consumer: one worker at concurrency 1 runs jobs in the order they were added.
  let handled = 0;
  const worker = new Worker<BullmqJobData>(
    queue.name,
    async (job) => {
      const { payload, headers } = job.data; // headers: outboxer-id (deduplicate on it), -type, -group-key
      console.log(
        `${headers['outboxer-group-key']} #${headers['outboxer-id']} ${job.name} ${JSON.stringify(payload)}`,
      );
      handled += 1;
    },
    { connection, concurrency: 1 },
  );

  const db = new Database(':memory:');
  db.exec(
    'CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL, paid INTEGER NOT NULL DEFAULT 0)',
  );
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
    outboxes: { orders: { relay: bullmqRelay({ queue }), pollInterval: 100 } },
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

    const deadline = Date.now() + 10_000;
    while (handled < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  } finally {
    await outboxer.stop();
    await worker.close();
    await queue.obliterate({ force: true });
    await queue.close();
    db.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
