/**
 * outboxer with TypeORM on MySQL or MariaDB: publish with the transaction's EntityManager, and the
 * order and its event commit together, or not at all.
 *
 *   npx tsx examples/adapters/typeorm-mysql.ts      (DATABASE_URL, default mysql://root@127.0.0.1:3306/test)
 */
import 'reflect-metadata';
import { pathToFileURL } from 'node:url';
import { DataSource, EntitySchema } from 'typeorm';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { typeorm } from 'outboxer/typeorm';

interface Order {
  id: number;
  customer: string;
  total: number;
}

const OrderEntity = new EntitySchema<Order>({
  name: 'Order',
  tableName: 'orders',
  columns: {
    id: { type: Number, primary: true, generated: true },
    customer: { type: String },
    total: { type: Number },
  },
});

export async function main(databaseUrl = process.env.DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/test') {
  // type 'mysql' or 'mariadb': both are TypeORM's MySQL driver over mysql2.
  const dataSource = await new DataSource({
    type: 'mysql',
    url: databaseUrl,
    entities: [OrderEntity],
  }).initialize();
  await dataSource.query(
    `CREATE TABLE IF NOT EXISTS orders (id INT AUTO_INCREMENT PRIMARY KEY, customer VARCHAR(200) NOT NULL, total INT NOT NULL)`,
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
    // The dialect comes from the DataSource's type: MySQL's statements, `?` placeholders.
    database: typeorm(dataSource),
    outboxes: {
      // MySQL has no LISTEN/NOTIFY: relays poll, and this instance wakes its own relay on publish.
      orders: { relay, pollInterval: 500 },
    },
  });
  try {
    await outboxer.migrate();
    await outboxer.start();

    // Publish with the manager of the transaction that saves the order.
    await dataSource.transaction(async (manager) => {
      const order = await manager.save(OrderEntity, { customer: 'ada', total: 4200 });
      await outboxer.publish(
        manager,
        'orders',
        { orderId: order.id, total: order.total },
        { groupKey: `order:${order.id}`, type: 'OrderPlaced' },
      );
    });
    // A checkout that fails after publishing: its event is rolled back with the order.
    await dataSource
      .transaction(async (manager) => {
        const order = await manager.save(OrderEntity, { customer: 'bob', total: 100 });
        await outboxer.publish(
          manager,
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
    await dataSource.destroy();
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
