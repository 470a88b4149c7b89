import pg from 'pg';
import { Outboxer, defineMessage, functionRelay } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';

const OrderPaid = defineMessage<{ orderId: number }>({
  outbox: 'orders',
  type: 'OrderPaid',
  groupKey: (event) => `order:${event.orderId}`, // events of one order stay in sequence
});

export async function main(send: (payload: unknown) => Promise<void> = async () => {}): Promise<void> {
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
  const outboxer = new Outboxer({
    database: nodePostgres(pool),
    outboxes: { orders: { relay: functionRelay((message) => send(message.payload)), maxAttempts: 10 } },
  });
  await outboxer.migrate(); // or postgresSchemaSql() in your own migration tool
  await outboxer.start();

  const client = await pool.connect();
  await client.query('BEGIN');
  await client.query('CREATE TEMP TABLE IF NOT EXISTS orders (id int PRIMARY KEY, status text)');
  await client.query(`INSERT INTO orders VALUES (42, 'paid')`);
  await outboxer.publish(client, OrderPaid({ orderId: 42 })); // written in your transaction
  await client.query('COMMIT'); // the message exists now, and only now
  client.release();

  while ((await outboxer.counts('orders')).pending > 0) await new Promise((r) => setTimeout(r, 50));
  await outboxer.stop(); // on SIGTERM: finishes the batch in flight
  await pool.end();
}
