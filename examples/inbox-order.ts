/**
 * Order at the consumer: an outboxer producer's messages of one order arrive out of order (its
 * payment was dead-lettered, then retried after the order had shipped). The inbox handles the late
 * message and says it is late; the handler records the payment but does not move the order's
 * status back.
 *
 * Needs PostgreSQL in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres).
 *
 *   npx tsx examples/inbox-order.ts
 */
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { Outboxer } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';

/** What a broker hands the consumer: outboxer's headers and the payload. */
interface Delivery {
  headers: Record<string, string>;
  payload: { orderId: number; status: string };
}

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  const pool = new pg.Pool({ connectionString: databaseUrl });
  const outboxer = new Outboxer({ database: nodePostgres(pool), inboxes: { orders: {} } });
  try {
    await pool.query(
      'CREATE TABLE IF NOT EXISTS order_status (order_id int PRIMARY KEY, status text NOT NULL)',
    );
    await pool.query('CREATE TABLE IF NOT EXISTS order_events (order_id int NOT NULL, status text NOT NULL)');
    await outboxer.migrate(); // creates outboxer_inbox and outboxer_inbox_groups

    async function onDelivery({ headers, payload }: Delivery): Promise<void> {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const message = {
          id: headers['outboxer-id']!,
          source: headers['outboxer-outbox'],
          groupKey: headers['outboxer-group-key'],
          sequence: headers['outboxer-id'], // the producer's id orders its group's messages
        };
        const outcome = await outboxer.inbox('orders').handle(client, message, async (order) => {
          // Every event is kept; the status moves forward only: a late event does not undo a later one.
          await client.query('INSERT INTO order_events VALUES ($1, $2)', [payload.orderId, payload.status]);
          if (!order.outOfOrder) {
            await client.query(
              'INSERT INTO order_status VALUES ($1, $2) ON CONFLICT (order_id) DO UPDATE SET status = $2',
              [payload.orderId, payload.status],
            );
          }
        });
        await client.query('COMMIT');
        if (outcome.outOfOrder)
          console.log(`#${message.id} ${payload.status}: late, after #${outcome.after}; status kept`);
        else
          console.log(`#${message.id} ${payload.status}${outcome.duplicate ? ': duplicate, skipped' : ''}`);
      } catch (error) {
        await client.query('ROLLBACK');
        throw error; // not acknowledged: the broker delivers it again
      } finally {
        client.release();
      }
    }

    const headers = (id: number) => ({
      'outboxer-id': String(id),
      'outboxer-outbox': 'orders',
      'outboxer-group-key': 'order:1',
    });
    // Ids 2 and 4 went to other orders' groups: a group's ids grow but have gaps.
    await onDelivery({ headers: headers(1), payload: { orderId: 1, status: 'placed' } });
    await onDelivery({ headers: headers(5), payload: { orderId: 1, status: 'shipped' } });
    await onDelivery({ headers: headers(3), payload: { orderId: 1, status: 'paid' } }); // retried late
    await onDelivery({ headers: headers(3), payload: { orderId: 1, status: 'paid' } }); // and redelivered
    const { rows } = await pool.query<{ status: string }>(
      'SELECT status FROM order_status WHERE order_id = 1',
    );
    console.log(`status of order 1: ${rows[0]!.status}`);
  } finally {
    await outboxer.stop();
    await pool.end();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
