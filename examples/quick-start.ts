import pg from 'pg';
import { Outboxer, functionRelay } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
// Your own table, here for the example (the transaction below updates order 42):
await pool.query(`CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY, status text)`);
await pool.query(`INSERT INTO orders VALUES (42, 'placed') ON CONFLICT DO NOTHING`);

const outboxer = new Outboxer({
  database: nodePostgres(pool),
  outboxes: { orders: { relay: functionRelay((message) => console.log('delivered', message.payload)) } },
});
await outboxer.migrate(); // or postgresSchemaSql() in your own migration tool
await outboxer.start();

const client = await pool.connect();
await client.query('BEGIN');
await client.query(`UPDATE orders SET status = 'paid' WHERE id = 42`); // your change...
await outboxer.publish(client, 'orders', { orderId: 42 }, { groupKey: 'order:42' }); // ...and its message
await client.query('COMMIT'); // both exist now, and only now
client.release();

while ((await outboxer.counts('orders')).pending > 0) await new Promise((r) => setTimeout(r, 50));
await outboxer.stop(); // on SIGTERM: finishes the batch in flight
await pool.end();
