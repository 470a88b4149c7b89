/**
 * outboxer with Kysely on PostgreSQL: the order and its event commit together, or not at all.
 * (On SQLite the same code works with `new SqliteDialect({ database: new Database(file) })`.)
 *
 *   npx tsx examples/adapters/kysely.ts      (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres)
 */
import { pathToFileURL } from 'node:url';
import { Kysely, PostgresDialect, type Generated } from 'kysely';
import pg from 'pg';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { kysely } from 'outboxer/kysely';
import { nodePostgres } from 'outboxer/pg';

interface Shop {
  orders: { id: Generated<number>; customer: string; total: number };
}

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
) {
  const pool = new pg.Pool({ connectionString: databaseUrl });
  const db = new Kysely<Shop>({ dialect: new PostgresDialect({ pool }) });
  await db.schema
    .createTable('orders')
    .ifNotExists()
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('customer', 'text', (c) => c.notNull())
    .addColumn('total', 'integer', (c) => c.notNull())
    .execute();

  const received: Envelope[] = [];
  let arrived!: () => void;
  const delivered = new Promise<void>((resolve) => (arrived = resolve));
  // The relay: here a function that keeps what it receives (in production SQS, Kafka, a webhook…).
  const relay = functionRelay(async (message: Envelope) => {
    received.push(message);
    arrived();
  });
  const outboxer = new Outboxer({
    // Kysely has no LISTEN: notify: true wakes relays through a dedicated connection of the pool.
    database: kysely(db, { notifications: nodePostgres(pool) }),
    outboxes: {
      orders: { relay, notify: true },
    },
  });
  try {
    await outboxer.migrate();
    await outboxer.start();

    // Publish with the trx of the transaction that writes the order.
    await db.transaction().execute(async (trx) => {
      const order = await trx
        .insertInto('orders')
        .values({ customer: 'ada', total: 4200 })
        .returning(['id', 'total'])
        .executeTakeFirstOrThrow();
      await outboxer.publish(
        trx,
        'orders',
        { orderId: order.id, total: order.total },
        { groupKey: `order:${order.id}`, type: 'OrderPlaced' },
      );
    });
    // A checkout that fails after publishing: its event is rolled back with the order.
    await db
      .transaction()
      .execute(async (trx) => {
        const order = await trx
          .insertInto('orders')
          .values({ customer: 'bob', total: 100 })
          .returning('id')
          .executeTakeFirstOrThrow();
        await outboxer.publish(
          trx,
          'orders',
          { orderId: order.id },
          { groupKey: `order:${order.id}`, type: 'OrderPlaced' },
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
    await db.destroy();
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
