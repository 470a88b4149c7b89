/**
 * outboxer with Knex on PostgreSQL: the order and its event commit together, or not at all.
 *
 *   npx tsx examples/adapters/knex.ts      (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres)
 */
import { pathToFileURL } from 'node:url';
import createKnex from 'knex';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { knex } from 'outboxer/knex';

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
) {
  const db = createKnex({ client: 'pg', connection: databaseUrl });
  if (!(await db.schema.hasTable('orders'))) {
    await db.schema.createTable('orders', (table) => {
      table.increments('id');
      table.string('customer').notNullable();
      table.integer('total').notNullable();
    });
  }

  const received: Envelope[] = [];
  let arrived!: () => void;
  const delivered = new Promise<void>((resolve) => (arrived = resolve));
  // The relay: here a function that keeps what it receives (in production SQS, Kafka, a webhook…).
  const relay = functionRelay(async (message: Envelope) => {
    received.push(message);
    arrived();
  });
  const outboxer = new Outboxer({
    database: knex(db),
    outboxes: {
      orders: { relay, pollInterval: 50 },
    },
  });
  try {
    await outboxer.migrate();
    await outboxer.start();

    // Publish with the trx of the transaction that writes the order.
    await db.transaction(async (trx) => {
      const [order] = await trx('orders').insert({ customer: 'ada', total: 4200 }).returning(['id', 'total']);
      await outboxer.publish(
        trx,
        'orders',
        { orderId: order.id, total: order.total },
        { groupKey: `order:${order.id}`, type: 'OrderPlaced' },
      );
    });
    // A checkout that fails after publishing: its event is rolled back with the order.
    await db
      .transaction(async (trx) => {
        const [order] = await trx('orders').insert({ customer: 'bob', total: 100 }).returning('id');
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
