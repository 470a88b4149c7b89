/**
 * outboxer with MikroORM 7 on PostgreSQL: publish with the EntityManager of em.transactional(),
 * and the order and its event commit together, or not at all.
 *
 *   npx tsx examples/adapters/mikro-orm.ts      (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres)
 */
import { pathToFileURL } from 'node:url';
import { EntitySchema, MikroORM } from '@mikro-orm/postgresql';
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

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
) {
  const orm = await MikroORM.init({ clientUrl: databaseUrl, entities: [OrderEntity] });
  const connection = orm.em.getConnection();
  await connection.execute(
    `CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, customer text NOT NULL, total int NOT NULL)`,
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
    database: mikroOrm(orm),
    outboxes: {
      orders: { relay, pollInterval: 50 },
    },
  });
  try {
    await outboxer.migrate();
    await outboxer.start();

    // Publish with the em of the transaction; the flush at its end writes the order.
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
