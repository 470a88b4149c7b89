/**
 * The inbox: a consumer receives the same message twice (a broker redelivers it) and charges once.
 * The charge and the inbox's record of the message commit together, in one transaction.
 *
 * Needs PostgreSQL in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres).
 *
 *   npx tsx examples/inbox.ts
 */
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { Outboxer } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';

interface OrderPaid {
  id: string; // the message's id at its source: with an outboxer producer, its `outboxer-id` header
  orderId: number;
  amount: number;
}

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  const pool = new pg.Pool({ connectionString: databaseUrl });
  const outboxer = new Outboxer({ database: nodePostgres(pool), inboxes: { payments: {} } });
  try {
    await pool.query('CREATE TABLE IF NOT EXISTS charges (order_id int NOT NULL, amount int NOT NULL)');
    await outboxer.migrate(); // creates the inbox table, outboxer_inbox

    // What a consumer does with each delivery: handle it in a transaction, then acknowledge it.
    async function onDelivery(message: OrderPaid): Promise<void> {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const outcome = await outboxer
          .inbox('payments')
          .handle(client, { id: message.id, source: 'orders' }, async () => {
            await client.query('INSERT INTO charges VALUES ($1, $2)', [message.orderId, message.amount]);
          });
        await client.query('COMMIT');
        console.log(
          outcome.duplicate
            ? `${message.id}: already handled at ${outcome.handledAt.toISOString()}, skipped`
            : `${message.id}: charged ${message.amount}`,
        );
      } catch (error) {
        await client.query('ROLLBACK');
        throw error; // not acknowledged: the broker delivers it again
      } finally {
        client.release();
      }
    }

    const delivery = { id: 'orders-42', orderId: 42, amount: 4200 };
    await onDelivery(delivery);
    await onDelivery(delivery); // the broker delivers it again
    const { rows } = await pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM charges WHERE order_id = 42',
    );
    console.log(`charges for order 42: ${rows[0]!.n}`);
  } finally {
    await outboxer.stop();
    await pool.end();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
