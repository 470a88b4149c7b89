/**
 * outboxer with MikroORM 7 on MySQL or MariaDB: publish with the EntityManager of
 * em.transactional(), and the order and its event commit together, or not at all.
 *
 *   npx tsx examples/adapters/mikro-orm-mysql.ts      (DATABASE_URL, default mysql://root@127.0.0.1:3306/test)
 */
import { pathToFileURL } from 'node:url';
import { EntitySchema, MikroORM } from '@mikro-orm/mysql';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { mikroOrm } from 'outboxer/mikro-orm';

interface Order {
  id: number;
  customer: string;
  total: number;
}

const OrderEntity = new EntitySchema<Order>({
  name: 'Order',
  tableName: 'orders',
  properties: {
    id: { type: 'number', primary: true },
    customer: { type: 'string' },
    total: { type: 'number' },
  },
});

export async function main(databaseUrl = process.env.DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/test') {
  // @mikro-orm/mariadb's MikroORM works the same way, for MariaDB.
  const orm = await MikroORM.init({ clientUrl: databaseUrl, entities: [OrderEntity] });
  await orm.em
    .getConnection()
    .execute(
      `CREATE TABLE IF NOT EXISTS orders (id INT AUTO_INCREMENT PRIMARY KEY, customer VARCHAR(255) NOT NULL, total INT NOT NULL)`,
    );

  const received: Envelope[] = [];
  let arrived!: () => void;
  const delivered = new Promise<void>((resolve) => (arrived = resolve));
  // The relay: here a function that keeps what it receives (in production SQS, Kafka, a webhook…).
  const relay = functionRelay(async (message: Envelope) => {
    received.push(message);
    arrived();
  });
  // The dialect comes from the ORM's platform (MySQL here); MySQL has no NOTIFY: relays poll, and
  // an instance that publishes wakes its own relays.
  const outboxer = new Outboxer({
    database: mikroOrm(orm),
    outboxes: {
      orders: { relay, pollInterval: 50 },
    },
  });
  try {
    await outboxer.migrate();
    await outboxer.start();

    // Publish with the em of the transaction; the flush before it writes the order and gives its id.
    await orm.em.fork().transactional(async (em) => {
      const order = em.create(OrderEntity, { customer: 'ada', total: 4200 });
      await em.flush();
      await outboxer.publish(
        em,
        'orders',
        { orderId: order.id, total: order.total },
        { groupKey: `order:${order.id}`, type: 'OrderPlaced' },
      );
    });
    // A checkout that fails after publishing: its event is rolled back with the order.
    await orm.em
      .fork()
      .transactional(async (em) => {
        const order = em.create(OrderEntity, { customer: 'bob', total: 100 });
        await em.flush();
        await outboxer.publish(
          em,
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
    await orm.close(true);
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
