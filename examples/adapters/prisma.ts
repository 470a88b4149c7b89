/**
 * outboxer with Prisma 7 (driver adapter @prisma/adapter-pg) on PostgreSQL: publish inside an
 * interactive transaction, and the order and its event commit together, or not at all.
 *
 * In your application the client comes from `npx prisma generate`:
 *   import { PrismaClient } from './generated/prisma/client.js';
 * Here it is generated from test/adapters/prisma/schema.prisma on first use (offline: see
 * docs/adapters/prisma.md).
 *
 *   npx tsx examples/adapters/prisma.ts      (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres)
 */
import { pathToFileURL } from 'node:url';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { prisma as prismaAdapter } from 'outboxer/prisma';
import { loadPrismaClient } from '../../test/adapters/prisma/client.js';
import { databaseUrl, exampleSchema, until, withSearchPath, type ExampleResult } from './support.js';

export async function main(): Promise<ExampleResult> {
  const { PrismaClient } = await loadPrismaClient();
  const schema = exampleSchema();
  const url = withSearchPath(databaseUrl, schema);
  // schema: Prisma qualifies its model queries ("public"."orders" by default).
  const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }, { schema }) });
  // Prisma has no LISTEN: notify: true wakes relays through one pg connection outside Prisma.
  const listenPool = new pg.Pool({ connectionString: url, max: 1 });
  // Tables as prisma migrate would create them (it needs the schema engine: create them with SQL).
  await prisma.$executeRawUnsafe(`CREATE SCHEMA "${schema}"`);
  await prisma.$executeRawUnsafe(
    `CREATE TABLE orders (id serial PRIMARY KEY, customer text NOT NULL, total int NOT NULL)`,
  );

  const received: Envelope[] = [];
  const outboxer = new Outboxer({
    database: prismaAdapter(prisma, { notifications: nodePostgres(listenPool) }),
    outboxes: {
      orders: { relay: functionRelay(async (m: Envelope) => void received.push(m)), notify: true },
    },
  });
  try {
    await outboxer.migrate();
    await outboxer.start();

    // Publish with the tx of an interactive transaction.
    await prisma.$transaction(async (tx) => {
      const order = await tx.order.create({ data: { customer: 'ada', total: 4200 } });
      await outboxer.publish(
        tx,
        'orders',
        { orderId: order.id, total: order.total },
        { groupKey: `order:${order.id}`, type: 'OrderPlaced' },
      );
    });
    // A checkout that fails after publishing: its event is rolled back with the order.
    await prisma
      .$transaction(async (tx) => {
        const order = await tx.order.create({ data: { customer: 'bob', total: 100 } });
        await outboxer.publish(
          tx,
          'orders',
          { orderId: order.id },
          { groupKey: `order:${order.id}`, type: 'OrderPlaced' },
        );
        throw new Error('payment declined');
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
    await prisma.$executeRawUnsafe(`DROP SCHEMA "${schema}" CASCADE`);
    await prisma.$disconnect();
    await listenPool.end();
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
