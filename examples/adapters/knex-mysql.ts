/**
 * outboxer with Knex on MySQL or MariaDB: the order and its event commit together, or not at all.
 *
 *   npx tsx examples/adapters/knex-mysql.ts      (DATABASE_URL, default mysql://root@127.0.0.1:3306/test)
 */
import { pathToFileURL } from 'node:url';
import createKnex from 'knex';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { knex } from 'outboxer/knex';

export async function main(databaseUrl = process.env.DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/test') {
  const db = createKnex({ client: 'mysql2', connection: databaseUrl });
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
  // MySQL has no LISTEN: relays poll, and this instance wakes its own relays when it publishes.
  const outboxer = new Outboxer({
    database: knex(db),
    outboxes: {
      orders: { relay },
    },
  });
  try {
    await outboxer.migrate();
    await outboxer.start();

    // Publish with the trx of the transaction that writes the order.
    await db.transaction(async (trx) => {
      const total = 4200;
      // MySQL has no RETURNING: Knex's insert resolves with the new id.
      const [orderId] = await trx('orders').insert({ customer: 'ada', total });
      await outboxer.publish(
        trx,
        'orders',
        { orderId, total },
        { groupKey: `order:${orderId}`, type: 'OrderPlaced' },
      );
    });
    // A checkout that fails after publishing: its event is rolled back with the order.
    await db
      .transaction(async (trx) => {
        const [orderId] = await trx('orders').insert({ customer: 'bob', total: 100 });
        await outboxer.publish(
          trx,
          'orders',
          { orderId },
          { groupKey: `order:${orderId}`, type: 'OrderPlaced' },
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
