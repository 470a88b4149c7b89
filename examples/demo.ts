/**
 * The demo: `npm run demo`. No server needed: an embedded SQLite file, through Node's built-in
 * node:sqlite (Node 22.16+; better-sqlite3 on older Node, see demo-sqlite.ts).
 *
 * A shop writes orders and publishes their events in the same transaction. A relay that fails now
 * and then (a flaky downstream service) delivers them; outboxer retries with backoff, keeps each
 * order's events in sequence, and the demo checks that at the end.
 */
import diagnostics from 'node:diagnostics_channel';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Outboxer, defineMessage, functionRelay, type Envelope } from 'outboxer';
import { openDemoDatabase } from './demo-sqlite.js';

const OrderPlaced = defineMessage<{ orderId: number; total: number }>({
  outbox: 'orders',
  type: 'OrderPlaced',
  groupKey: (event) => `order:${event.orderId}`,
});
const OrderPaid = defineMessage<{ orderId: number }>({
  outbox: 'orders',
  type: 'OrderPaid',
  groupKey: (e) => `order:${e.orderId}`,
});
const OrderShipped = defineMessage<{ orderId: number }>({
  outbox: 'orders',
  type: 'OrderShipped',
  groupKey: (e) => `order:${e.orderId}`,
});

export interface DemoResult {
  /** Which SQLite library the demo ran on: `node:sqlite` where this Node has it. */
  library: string;
  orders: number;
  delivered: number;
  retries: number;
  outOfOrder: number;
  counts: { pending: number; delivered: number; dead: number };
}

export async function main(
  options: { orders?: number; failureRate?: number; quiet?: boolean } = {},
): Promise<DemoResult> {
  const orderCount = options.orders ?? 200;
  const failureRate = options.failureRate ?? 0.2;
  const log = options.quiet ? () => undefined : (line: string) => process.stdout.write(`${line}\n`);
  const dir = mkdtempSync(join(tmpdir(), 'outboxer-demo-'));
  const db = await openDemoDatabase(join(dir, 'shop.db'));
  db.run('CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL, status TEXT NOT NULL)');

  // The downstream service: refuses ~20% of calls, and records what it accepted.
  let random = 12345;
  const nextRandom = () => (random = (random * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const received = new Map<string, string[]>();
  const relay = functionRelay(async (event: Envelope) => {
    if (nextRandom() < failureRate)
      throw new Error(`503 from billing-service for ${event.type} #${event.id}`);
    const list = received.get(event.groupKey!) ?? [];
    list.push(event.type!);
    received.set(event.groupKey!, list);
  });

  let retries = 0;
  const onRetry = (message: unknown) => {
    retries += 1;
    const { id, attempts, error, delay } = message as {
      id: number;
      attempts: number;
      error: string;
      delay: number;
    };
    if (retries <= 5) log(`  retry  #${id} attempt ${attempts} failed (${error}); next try in ${delay} ms`);
    if (retries === 6) log('  … (more retries, same story)');
  };
  diagnostics.subscribe('outboxer:message:retry', onRetry);

  const outboxer = new Outboxer({
    database: db.adapter,
    outboxes: { orders: { relay, partitions: 2, pollInterval: 50, backoff: { min: 20, max: 200 } } },
  });
  try {
    await outboxer.migrate();
    await outboxer.start();
    log(`SQLite through ${db.library}.`);
    log(
      `Placing ${orderCount} orders; each publishes OrderPlaced, OrderPaid, OrderShipped in its own transactions.`,
    );

    const tx = db.connection;
    const placeOrder = (id: number) =>
      db.transaction(() => {
        const total = 1000 + id;
        db.run('INSERT INTO orders (id, total, status) VALUES (?, ?, ?)', id, total, 'placed');
        outboxer.publish(tx, OrderPlaced({ orderId: id, total }));
      });
    const updateOrder = (id: number, status: 'paid' | 'shipped') =>
      db.transaction(() => {
        db.run('UPDATE orders SET status = ? WHERE id = ?', status, id);
        outboxer.publish(tx, status === 'paid' ? OrderPaid({ orderId: id }) : OrderShipped({ orderId: id }));
      });
    const failedCheckout = (id: number) =>
      db.transaction(() => {
        db.run('INSERT INTO orders (id, total, status) VALUES (?, ?, ?)', id, 0, 'placed');
        outboxer.publish(tx, OrderPlaced({ orderId: id, total: 0 }));
        throw new Error('card declined'); // rolls back the order AND its event
      });

    for (let id = 1; id <= orderCount; id += 1) placeOrder(id);
    for (let id = 1; id <= orderCount; id += 1) updateOrder(id, 'paid');
    try {
      failedCheckout(orderCount + 1);
    } catch {
      log(`Order ${orderCount + 1}: checkout failed and rolled back; its event was never published.`);
    }
    for (let id = 1; id <= orderCount; id += 1) updateOrder(id, 'shipped');

    while ((await outboxer.counts('orders')).pending > 0)
      await new Promise((resolve) => setTimeout(resolve, 50));
    await outboxer.stop();

    const expected = ['OrderPlaced', 'OrderPaid', 'OrderShipped'];
    let outOfOrder = 0;
    let delivered = 0;
    for (const [, events] of received) {
      delivered += events.length;
      const firsts = events.filter((e, i) => events.indexOf(e) === i);
      if (firsts.join() !== expected.join()) outOfOrder += 1;
    }
    const counts = await outboxer.counts('orders');
    log('');
    log(
      `Delivered ${delivered} events for ${received.size} orders after ${retries} failed attempts were retried.`,
    );
    log(`Orders whose events arrived out of order: ${outOfOrder}.`);
    log(`Phantom events from the rolled-back checkout: ${received.has(`order:${orderCount + 1}`) ? 1 : 0}.`);
    log(`Final counts: ${JSON.stringify(counts)}`);
    return { library: db.library, orders: received.size, delivered, retries, outOfOrder, counts };
  } finally {
    diagnostics.unsubscribe('outboxer:message:retry', onRetry);
    await outboxer.stop();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
