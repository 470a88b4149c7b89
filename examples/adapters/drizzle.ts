/**
 * outboxer with Drizzle ORM, on PostgreSQL (node-postgres) and on SQLite (better-sqlite3, where
 * publishing is synchronous, like Drizzle's transactions there).
 *
 *   npx tsx examples/adapters/drizzle.ts      (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres;
 *                                             SQLITE_FILE, default :memory:)
 */
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { sql } from 'drizzle-orm';
import { drizzle as drizzleSqlite } from 'drizzle-orm/better-sqlite3';
import { drizzle as drizzlePostgres } from 'drizzle-orm/node-postgres';
import { integer as pgInteger, pgTable, serial, text as pgText } from 'drizzle-orm/pg-core';
import { integer, sqliteTable, text } from 'drizzle-orm/sqlite-core';
import pg from 'pg';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { drizzle } from 'outboxer/drizzle';

const orders = pgTable('orders', {
  id: serial('id').primaryKey(),
  customer: pgText('customer').notNull(),
  total: pgInteger('total').notNull(),
});
const sqliteOrders = sqliteTable('orders', {
  id: integer('id').primaryKey({ autoIncrement: true }),
  customer: text('customer').notNull(),
  total: integer('total').notNull(),
});

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
) {
  const pool = new pg.Pool({ connectionString: databaseUrl });
  const db = drizzlePostgres(pool);
  await db.execute(
    sql`CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, customer text NOT NULL, total int NOT NULL)`,
  );

  const received: Envelope[] = [];
  let arrived!: () => void;
  const delivered = new Promise<void>((resolve) => (arrived = resolve));
  // The relay: here a function that keeps what it receives (in production SQS, Kafka, a webhook…).
  const relay = functionRelay(async (message: Envelope) => {
    received.push(message);
    arrived();
  });
  // Relays run on the pool Drizzle wraps (db.$client), and LISTEN there with notify: true.
  const outboxer = new Outboxer({
    database: drizzle(db),
    outboxes: {
      orders: { relay, notify: true },
    },
  });
  try {
    await outboxer.migrate();
    await outboxer.start();

    // Publish with the tx of the transaction that writes the order.
    await db.transaction(async (tx) => {
      const [order] = await tx.insert(orders).values({ customer: 'ada', total: 4200 }).returning();
      await outboxer.publish(
        tx,
        'orders',
        { orderId: order!.id, total: order!.total },
        { groupKey: `order:${order!.id}`, type: 'OrderPlaced' },
      );
    });
    // A checkout that fails after publishing: its event is rolled back with the order.
    await db
      .transaction(async (tx) => {
        const [order] = await tx.insert(orders).values({ customer: 'bob', total: 100 }).returning();
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

/** The same on SQLite: Drizzle's better-sqlite3 transactions are synchronous, and so is publish. */
export async function mainSqlite(file = process.env.SQLITE_FILE ?? ':memory:') {
  const sqlite = new Database(file);
  const db = drizzleSqlite(sqlite);
  db.run(
    sql`CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY AUTOINCREMENT, customer TEXT NOT NULL, total INTEGER NOT NULL)`,
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
    database: drizzle(db),
    outboxes: {
      orders: { relay, pollInterval: 50 },
    },
  });
  try {
    await outboxer.migrate();
    await outboxer.start();
    db.transaction((tx) => {
      const order = tx.insert(sqliteOrders).values({ customer: 'ada', total: 4200 }).returning().get();
      const id: number = outboxer.publish(
        tx,
        'orders',
        { orderId: order.id, total: order.total },
        { groupKey: `order:${order.id}`, type: 'OrderPlaced' },
      );
      return id;
    });
    try {
      db.transaction((tx) => {
        const order = tx.insert(sqliteOrders).values({ customer: 'bob', total: 100 }).returning().get();
        outboxer.publish(
          tx,
          'orders',
          { orderId: order.id },
          { groupKey: `order:${order.id}`, type: 'OrderPlaced' },
        );
        throw new Error('payment declined');
      });
    } catch {
      // rolled back, event included
    }
    await delivered;
    await outboxer.stop();
    return {
      delivered: received.map(({ type, groupKey, payload }) => ({ type, groupKey, payload })),
      counts: await outboxer.counts('orders'),
    };
  } finally {
    await outboxer.stop();
    sqlite.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  Promise.all([main(), mainSqlite()]).then(
    (result) => console.log(JSON.stringify(result, null, 2)),
    (error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    },
  );
}
