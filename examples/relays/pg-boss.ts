/**
 * outboxer → pg-boss 12, with the outbox in PostgreSQL through node-postgres (`pg`): the same
 * database as pg-boss's jobs here, though the two need not share one. The queue's
 * `key_strict_fifo` policy keeps each order's jobs in sequence however many workers run them.
 *
 * Needs PostgreSQL 13 or newer in DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres;
 * in this repository: `bash scripts/services/postgres.sh`). It creates a table `orders` if there is
 * none (the README's Quick start has the same one), outboxer's own tables, and pg-boss's schema
 * `pgboss` if it is not there yet.
 *
 *   npx tsx examples/relays/pg-boss.ts
 */
import { pathToFileURL } from 'node:url';
import { PgBoss } from 'pg-boss';
import pg from 'pg';
import { Outboxer, defineMessage } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { pgBossRelay, type PgBossJobData } from 'outboxer/pg-boss';

const OrderPlaced = defineMessage<{ orderId: number; total: number }>({
  outbox: 'orders',
  type: 'OrderPlaced',
  groupKey: (order) => `order:${order.orderId}`,
});
const OrderPaid = defineMessage<{ orderId: number }>({
  outbox: 'orders',
  type: 'OrderPaid',
  groupKey: (order) => `order:${order.orderId}`,
});

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
): Promise<void> {
  const boss = new PgBoss(databaseUrl);
  boss.on('error', (error) => console.error('pg-boss:', error.message));
  await boss.start(); // before outboxer.start(): the relay checks the queue
  // key_strict_fifo: the relay gives every job its group key as singletonKey, and pg-boss runs one
  // job per key at a time, oldest first, a failed job's retries before the next one. (createQueue
  // leaves a queue that already exists as it is, policy included.)
  await boss.createQueue('order-events', { policy: 'key_strict_fifo' });

  // The consumer: four workers, ten jobs per fetch; each order's jobs still run one after another.
  let handled = 0;
  await boss.work<PgBossJobData>(
    'order-events',
    { localConcurrency: 4, batchSize: 10, pollingIntervalSeconds: 0.5 },
    async (jobs) => {
      for (const job of jobs) {
        const { payload, headers } = job.data; // headers: outboxer-id (deduplicate on it), -type, -group-key
        console.log(
          `${headers['outboxer-group-key']} #${headers['outboxer-id']} ${headers['outboxer-type']} ${JSON.stringify(payload)}`,
        );
        handled += 1;
      }
    },
  );

  const pool = new pg.Pool({ connectionString: databaseUrl });
  const outboxer = new Outboxer({
    database: nodePostgres(pool),
    outboxes: { orders: { relay: pgBossRelay({ boss, queue: 'order-events' }), pollInterval: 100 } },
  });
  try {
    // Your own table, here for the example.
    await pool.query('CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY, status text)');
    await outboxer.migrate(); // or postgresSchemaSql() in your own migration tool
    await outboxer.start();

    // The business write and the message commit together, or neither does.
    await inTransaction(pool, async (client) => {
      await client.query(
        `INSERT INTO orders VALUES (1, 'placed') ON CONFLICT (id) DO UPDATE SET status = 'placed'`,
      );
      await outboxer.publish(client, OrderPlaced({ orderId: 1, total: 4200 }));
    });
    await inTransaction(pool, async (client) => {
      await client.query(`UPDATE orders SET status = 'paid' WHERE id = 1`);
      await outboxer.publish(client, OrderPaid({ orderId: 1 }));
    });

    const deadline = Date.now() + 30_000;
    while (handled < 2) {
      if (Date.now() > deadline) throw new Error('the jobs did not run within 30 s');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    await outboxer.stop(); // then pg-boss, which the relay uses until here
    await boss.stop();
    await pool.end();
  }
}

/** Runs `work` in a transaction on a client of the pool: COMMIT if it returns, ROLLBACK if it throws. */
async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
