/**
 * outboxer with postgres.js: the order and its event commit together, or not at all. Relays wake
 * up on NOTIFY through postgres.js's own LISTEN connection.
 *
 *   npx tsx examples/adapters/postgres-js.ts      (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres)
 */
import { pathToFileURL } from 'node:url';
import postgres from 'postgres';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { postgresJs } from 'outboxer/postgres-js';

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
) {
  const sql = postgres(databaseUrl, { onnotice: () => undefined });
  await sql`CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, customer text NOT NULL, total int NOT NULL)`;

  const received: Envelope[] = [];
  let arrived!: () => void;
  const delivered = new Promise<void>((resolve) => (arrived = resolve));
  // The relay: here a function that keeps what it receives (in production SQS, Kafka, a webhook…).
  const relay = functionRelay(async (message: Envelope) => {
    received.push(message);
    arrived();
  });
  const outboxer = new Outboxer({
    database: postgresJs(sql),
    outboxes: {
      orders: { relay, notify: true },
    },
  });
  try {
    await outboxer.migrate();
    await outboxer.start();

    // Publish with the sql that sql.begin() passes to its callback.
    await sql.begin(async (tx) => {
      const [order] = await tx`INSERT INTO orders (customer, total) VALUES ('ada', 4200) RETURNING id, total`;
      await outboxer.publish(
        tx,
        'orders',
        { orderId: order!.id, total: order!.total },
        { groupKey: `order:${order!.id}`, type: 'OrderPlaced' },
      );
    });
    // A checkout that fails after publishing: its event is rolled back with the order.
    await sql
      .begin(async (tx) => {
        const [order] = await tx`INSERT INTO orders (customer, total) VALUES ('bob', 100) RETURNING id`;
        await outboxer.publish(
          tx,
          'orders',
          { orderId: order!.id },
          { groupKey: `order:${order!.id}`, type: 'OrderPlaced' },
        );
        throw new Error('payment declined');
      })
      .catch(() => undefined);

    await delivered;
    await outboxer.stop();
    return {
      delivered: received.map(({ type, groupKey, payload }) => ({ type, groupKey, payload })),
      counts: await outboxer.counts('orders'),
    };
  } finally {
    await outboxer.stop();
    await sql.end();
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
