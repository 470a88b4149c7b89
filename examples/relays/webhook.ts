/**
 * outboxer → HTTP webhooks (Standard Webhooks signatures), with SQLite (better-sqlite3) as the
 * database. The receiver runs in the same process here so that the example is self-contained; in
 * real life it is someone else's service, and it verifies requests the same way.
 *
 *   npx tsx examples/relays/webhook.ts
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { Outboxer, defineMessage } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { verifyWebhook, webhookRelay, WebhookVerificationError } from 'outboxer/webhook';

const OrderPlaced = defineMessage<{ orderId: number; total: number }>({
  outbox: 'orders',
  type: 'order.placed',
  groupKey: (order) => `order:${order.orderId}`, // one order's webhooks arrive in order
});
const OrderPaid = defineMessage<{ orderId: number }>({
  outbox: 'orders',
  type: 'order.paid',
  groupKey: (order) => `order:${order.orderId}`,
});

export async function main(): Promise<void> {
  // Shared with the receiver once, out of band. Keep it in your secret store, not in code.
  const secret = process.env.WEBHOOK_SECRET ?? `whsec_${randomBytes(32).toString('base64')}`;

  // The receiver: verifies the signature over the raw body, then deduplicates on webhook-id
  // (the outbox id: a retry after a lost response carries the same one).
  const seen = new Set<string>();
  const receiver = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    try {
      const { id } = verifyWebhook(secret, req.headers, body);
      if (!seen.has(id)) {
        seen.add(id);
        const event = JSON.parse(body.toString('utf8')) as { type: string; data: unknown };
        console.log(
          `${String(req.headers['outboxer-group-key'])} #${id} ${event.type} ${JSON.stringify(event.data)}`,
        );
      }
      res.writeHead(204).end();
    } catch (error) {
      res.writeHead(error instanceof WebhookVerificationError ? 401 : 500).end();
    }
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks/orders`;

  const db = new Database(':memory:');
  db.exec(
    'CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL, paid INTEGER NOT NULL DEFAULT 0)',
  );
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
    outboxes: {
      // A small batch: the requests of a batch must finish within the partition lease (30 s).
      orders: { relay: webhookRelay({ url, secret, timeout: 5000 }), batchSize: 20, pollInterval: 100 },
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

    const deadline = Date.now() + 10_000;
    while ((await outboxer.counts('orders')).pending > 0) {
      if (Date.now() > deadline) throw new Error('the webhooks were not delivered within 10 s');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    await outboxer.stop();
    db.close();
    await new Promise((resolve) => receiver.close(resolve));
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
