/**
 * outboxer with Kysely on MySQL or MariaDB: the order and its event commit together, or not at all.
 *
 *   npx tsx examples/adapters/kysely-mysql.ts      (DATABASE_URL, default mysql://root@127.0.0.1:3306/test)
 */
import { pathToFileURL } from 'node:url';
import { Kysely, MysqlDialect, type Generated } from 'kysely';
import { createPool } from 'mysql2';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { kysely } from 'outboxer/kysely';

interface Shop {
  orders: { id: Generated<number>; customer: string; total: number };
}

export async function main(databaseUrl = process.env.DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/test') {
  // Kysely's MysqlDialect takes a mysql2 pool (the callback one, from 'mysql2').
  const db = new Kysely<Shop>({ dialect: new MysqlDialect({ pool: createPool({ uri: databaseUrl }) }) });
  await db.schema
    .createTable('orders')
    .ifNotExists()
    .addColumn('id', 'integer', (c) => c.autoIncrement().primaryKey())
    .addColumn('customer', 'varchar(100)', (c) => c.notNull())
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
  // MySQL has no LISTEN: relays poll, and this instance wakes its own relays when it publishes.
  const outboxer = new Outboxer({
    database: kysely(db),
    outboxes: {
      orders: { relay },
    },
  });
  try {
    await outboxer.migrate();
    await outboxer.start();

    // Publish with the trx of the transaction that writes the order.
    await db.transaction().execute(async (trx) => {
      const total = 4200;
      // MySQL has no RETURNING: the new id is the insert's insertId.
      const { insertId } = await trx
        .insertInto('orders')
        .values({ customer: 'ada', total })
        .executeTakeFirstOrThrow();
      const orderId = Number(insertId);
      await outboxer.publish(
        trx,
        'orders',
        { orderId, total },
        { groupKey: `order:${orderId}`, type: 'OrderPlaced' },
      );
    });
    // A checkout that fails after publishing: its event is rolled back with the order.
    await db
      .transaction()
      .execute(async (trx) => {
        const { insertId } = await trx
          .insertInto('orders')
          .values({ customer: 'bob', total: 100 })
          .executeTakeFirstOrThrow();
        const orderId = Number(insertId);
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
