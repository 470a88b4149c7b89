/**
 * outboxer with better-sqlite3: publish inside `db.transaction()`, synchronously (publish returns
 * the id, not a promise), and the order and its event commit together, or not at all.
 *
 *   npx tsx examples/adapters/better-sqlite3.ts      (SQLITE_FILE, default :memory:)
 */
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';

export async function main(file = process.env.SQLITE_FILE ?? ':memory:') {
  // An application opens a file (new Database('app.db')) in WAL mode.
  const db = new Database(file);
  if (file !== ':memory:') db.pragma('journal_mode = WAL');
  db.exec(
    `CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY AUTOINCREMENT, customer TEXT NOT NULL, total INTEGER NOT NULL)`,
  );

  const received: Envelope[] = [];
  let arrived!: () => void;
  const delivered = new Promise<void>((resolve) => (arrived = resolve));
  // The relay: here a function that keeps what it receives (in production SQS, Kafka, a webhook…).
  const relay = functionRelay(async (message: Envelope) => {
    received.push(message);
    arrived();
  });
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
    outboxes: {
      orders: { relay, pollInterval: 50 },
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

    await delivered;
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
