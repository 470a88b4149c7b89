/**
 * outboxer → pg-boss 10, with SQLite (better-sqlite3) as the outbox's database and Postgres under
 * pg-boss.
 *
 * Needs Postgres on 127.0.0.1:5432 (`bash scripts/services/postgres.sh`), or set DATABASE_URL.
 * pg-boss goes into a schema of its own for this run, dropped at the end.
 *
 *   npx tsx examples/relays/pg-boss.ts
 */
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import PgBoss from 'pg-boss';
import { Outboxer, defineMessage } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { pgBossRelay, type PgBossJobData } from 'outboxer/pg-boss';

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
  const schema = `outboxer_example_${randomBytes(4).toString('hex')}`;
  const boss = new PgBoss({
    connectionString: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    schema,
  });
  boss.on('error', (error) => console.error('pg-boss:', error.message));
  await boss.start(); // before outboxer.start(): the relay checks the queue
  await boss.createQueue('order-events'); // pg-boss 10 drops jobs for a queue that does not exist

  // The consumer: one worker taking one job at a time runs them in the order they were inserted.
  let handled = 0;
  await boss.work<PgBossJobData>(
    'order-events',
    { batchSize: 1, pollingIntervalSeconds: 0.5 },
    async ([job]) => {
      const { payload, headers } = job!.data; // headers: outboxer-id (deduplicate on it), -type, -group-key
      console.log(
        `${headers['outboxer-group-key']} #${headers['outboxer-id']} ${headers['outboxer-type']} ${JSON.stringify(payload)}`,
      );
      handled += 1;
    },
  );

  const db = new Database(':memory:');
  db.exec(
    'CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL, paid INTEGER NOT NULL DEFAULT 0)',
  );
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
    outboxes: { orders: { relay: pgBossRelay({ boss, queue: 'order-events' }), pollInterval: 100 } },
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
    await outboxer.stop(); // then pg-boss, which the relay uses until here
    await boss.getDb().executeSql(`DROP SCHEMA ${schema} CASCADE`, []); // an application keeps its schema
    await boss.stop();
    db.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
