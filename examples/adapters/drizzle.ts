/**
 * outboxer with Drizzle ORM, on PostgreSQL (node-postgres) and on SQLite (better-sqlite3, where
 * publishing is synchronous, like Drizzle's transactions there).
 *
 *   npx tsx examples/adapters/drizzle.ts      (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres)
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
import { databaseUrl, exampleSchema, until, withSearchPath, type ExampleResult } from './support.js';

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

export async function main(): Promise<ExampleResult> {
  const schema = exampleSchema();
  const pool = new pg.Pool({ connectionString: withSearchPath(databaseUrl, schema) });
  const db = drizzlePostgres(pool);
  await db.execute(sql.raw(`CREATE SCHEMA "${schema}"`));
  await db.execute(
    sql`CREATE TABLE orders (id serial PRIMARY KEY, customer text NOT NULL, total int NOT NULL)`,
  );

  const received: Envelope[] = [];
  // Relays run on the pool Drizzle wraps (db.$client), and LISTEN there with notify: true.
  const outboxer = new Outboxer({
    database: drizzle(db),
    outboxes: {
      orders: { relay: functionRelay(async (m: Envelope) => void received.push(m)), notify: true },
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

    await until(() => received.length === 1);
    await outboxer.stop();
    return {
      delivered: received.map(({ type, groupKey, payload }) => ({ type, groupKey, payload })),
      counts: await outboxer.counts('orders'),
    };
  } finally {
    await outboxer.stop();
    await db.execute(sql.raw(`DROP SCHEMA "${schema}" CASCADE`));
    await pool.end();
  }
}

/** The same on SQLite: Drizzle's better-sqlite3 transactions are synchronous, and so is publish. */
export async function mainSqlite(): Promise<ExampleResult> {
  const sqlite = new Database(':memory:');
  const db = drizzleSqlite(sqlite);
  db.run(
    sql`CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, customer TEXT NOT NULL, total INTEGER NOT NULL)`,
  );
  const received: Envelope[] = [];
  const outboxer = new Outboxer({
    database: drizzle(db),
    outboxes: {
      orders: { relay: functionRelay(async (m: Envelope) => void received.push(m)), pollInterval: 50 },
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
    await until(() => received.length === 1);
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
