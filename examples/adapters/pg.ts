/**
 * outboxer with node-postgres (pg): publish with the client of your transaction, and the order and
 * its event commit together, or not at all. Relays wake up on NOTIFY.
 *
 *   npx tsx examples/adapters/pg.ts      (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres)
 */
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
) {
  const pool = new pg.Pool({ connectionString: databaseUrl });
  await pool.query(
    `CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, customer text NOT NULL, total int NOT NULL)`,
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
    // Relays run on the pool; notify: true listens on one dedicated connection outside it.
    database: nodePostgres(pool),
    outboxes: {
      orders: { relay, notify: true },
    },
  });

  // Publish with the client of the transaction that writes the order.
  async function placeOrder(customer: string, total: number, fail = false): Promise<void> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<{ id: number }>(
        'INSERT INTO orders (customer, total) VALUES ($1, $2) RETURNING id',
        [customer, total],
      );
      const orderId = rows[0]!.id;
      await outboxer.publish(
        client,
        'orders',
        { orderId, total },
        { groupKey: `order:${orderId}`, type: 'OrderPlaced' },
      );
      if (fail) throw new Error('payment declined');
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    } finally {
      client.release();
    }
  }

  try {
    await outboxer.migrate();
    await outboxer.start();
    await placeOrder('ada', 4200);
    // A checkout that fails after publishing: its event is rolled back with the order.
    await placeOrder('bob', 100, true).catch(() => undefined);

    await delivered;
    await outboxer.stop();
    return {
      delivered: received.map(({ type, groupKey, payload }) => ({ type, groupKey, payload })),
      counts: await outboxer.counts('orders'),
    };
  } finally {
    await outboxer.stop();
    await pool.end();
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
