/**
 * outboxer with Node's built-in SQLite (node:sqlite, Node 22.16+): publish between BEGIN and
 * COMMIT, synchronously (publish returns the id, not a promise), and the order and its event
 * commit together, or not at all. Nothing to install but outboxer: no native module to compile.
 *
 *   npx tsx examples/adapters/node-sqlite.ts
 */
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { nodeSqlite } from 'outboxer/node-sqlite';
import { until, type ExampleResult } from './support.js';

export async function main(): Promise<ExampleResult> {
  // An application opens a file: new DatabaseSync('app.db', { timeout: 5_000 }), then
  // db.exec('PRAGMA journal_mode = WAL').
  const db = new DatabaseSync(':memory:');
  db.exec(
    `CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, customer TEXT NOT NULL, total INTEGER NOT NULL)`,
  );

  const received: Envelope[] = [];
  const outboxer = new Outboxer({
    database: nodeSqlite(db),
    outboxes: {
      orders: { relay: functionRelay(async (m: Envelope) => void received.push(m)), pollInterval: 50 },
    },
  });

  // Publish inside the transaction that writes the order.
  const insertOrder = db.prepare('INSERT INTO orders (customer, total) VALUES (?, ?)');
  const placeOrder = (customer: string, total: number, fail = false): number => {
    db.exec('BEGIN');
    try {
      const order = insertOrder.run(customer, total);
      const orderId = Number(order.lastInsertRowid);
      const messageId: number = outboxer.publish(
        db,
        'orders',
        { orderId, total },
        { groupKey: `order:${orderId}`, type: 'OrderPlaced' },
      );
      if (fail) throw new Error('payment declined');
      db.exec('COMMIT');
      return messageId;
    } catch (error) {
      db.exec('ROLLBACK');
      throw error;
    }
  };

  try {
    await outboxer.migrate();
    await outboxer.start();
    placeOrder('ada', 4200);
    // A checkout that fails after publishing: its event is rolled back with the order.
    try {
      placeOrder('bob', 100, true);
    } catch {
      // payment declined
    }

    await until(() => received.length === 1);
    await outboxer.stop();
    return {
      delivered: received.map(({ type, groupKey, payload }) => ({ type, groupKey, payload })),
      counts: await outboxer.counts('orders'),
    };
  } finally {
    await outboxer.stop();
    db.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().then(
    (result) => console.log(JSON.stringify(result, null, 2)),
    (error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    },
  );
}
