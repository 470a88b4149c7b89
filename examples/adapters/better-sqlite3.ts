/**
 * outboxer with better-sqlite3: publish inside `db.transaction()`, synchronously (publish returns
 * the id, not a promise), and the order and its event commit together, or not at all.
 *
 *   npx tsx examples/adapters/better-sqlite3.ts
 */
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { until, type ExampleResult } from './support.js';

export async function main(): Promise<ExampleResult> {
  // An application opens a file: new Database('app.db'), then db.pragma('journal_mode = WAL').
  const db = new Database(':memory:');
  db.exec(
    `CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, customer TEXT NOT NULL, total INTEGER NOT NULL)`,
  );

  const received: Envelope[] = [];
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
    outboxes: {
      orders: { relay: functionRelay(async (m: Envelope) => void received.push(m)), pollInterval: 50 },
    },
  });

  // Publish inside the transaction that writes the order.
  const placeOrder = db.transaction((customer: string, total: number, fail = false): number => {
    const order = db.prepare('INSERT INTO orders (customer, total) VALUES (?, ?)').run(customer, total);
    const orderId = Number(order.lastInsertRowid);
    const messageId: number = outboxer.publish(
      db,
      'orders',
      { orderId, total },
      { groupKey: `order:${orderId}`, type: 'OrderPlaced' },
    );
    if (fail) throw new Error('payment declined');
    return messageId;
  });

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
