/**
 * outboxer with Drizzle ORM on MySQL or MariaDB (drizzle-orm/mysql2): the order and its event
 * commit together, or not at all.
 *
 *   npx tsx examples/adapters/drizzle-mysql.ts      (DATABASE_URL, default mysql://root@127.0.0.1:3306/test)
 */
import { pathToFileURL } from 'node:url';
import { sql } from 'drizzle-orm';
import { int, mysqlTable, serial, varchar } from 'drizzle-orm/mysql-core';
import { drizzle as drizzleMysql } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { drizzle } from 'outboxer/drizzle';

const orders = mysqlTable('orders', {
  id: serial('id').primaryKey(),
  customer: varchar('customer', { length: 100 }).notNull(),
  total: int('total').notNull(),
});

export async function main(databaseUrl = process.env.DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/test') {
  const pool = mysql.createPool({ uri: databaseUrl });
  const db = drizzleMysql(pool);
  await db.execute(
    sql`CREATE TABLE IF NOT EXISTS orders (id SERIAL PRIMARY KEY, customer VARCHAR(100) NOT NULL, total INT NOT NULL)`,
  );

  const received: Envelope[] = [];
  let arrived!: () => void;
  const delivered = new Promise<void>((resolve) => (arrived = resolve));
  // The relay: here a function that keeps what it receives (in production SQS, Kafka, a webhook…).
  const relay = functionRelay(async (message: Envelope) => {
    received.push(message);
    arrived();
  });
  // Relays run on the pool Drizzle wraps (db.$client). MySQL has no LISTEN: relays poll, and this
  // instance wakes its own relays when it publishes.
  const outboxer = new Outboxer({
    database: drizzle(db),
    outboxes: {
      orders: { relay },
    },
  });
  try {
    await outboxer.migrate();
    await outboxer.start();

    // Publish with the tx of the transaction that writes the order.
    await db.transaction(async (tx) => {
      const total = 4200;
      // MySQL has no RETURNING: $returningId() reads the new id from the insert.
      const [order] = await tx.insert(orders).values({ customer: 'ada', total }).$returningId();
      await outboxer.publish(
        tx,
        'orders',
        { orderId: order!.id, total },
        { groupKey: `order:${order!.id}`, type: 'OrderPlaced' },
      );
    });
    // A checkout that fails after publishing: its event is rolled back with the order.
    await db
      .transaction(async (tx) => {
        const [order] = await tx.insert(orders).values({ customer: 'bob', total: 100 }).$returningId();
        await outboxer.publish(
          tx,
          'orders',
          { orderId: order!.id },
          { groupKey: `order:${order!.id}`, type: 'OrderPlaced' },
        );
        tx.rollback();
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
