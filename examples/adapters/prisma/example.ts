/**
 * outboxer with Prisma 7 (driver adapter @prisma/adapter-pg) on PostgreSQL: publish inside an
 * interactive transaction, and the order and its event commit together, or not at all.
 *
 * PrismaClient is the client `npx prisma generate` writes from schema.prisma (next to this file)
 * into ./generated/prisma (offline: see docs/adapters/prisma.md).
 *
 *   npx prisma generate --schema examples/adapters/prisma/schema.prisma
 *   npx tsx examples/adapters/prisma/example.ts      (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres)
 */
import { pathToFileURL } from 'node:url';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { prisma as prismaAdapter } from 'outboxer/prisma';
import { PrismaClient } from './generated/prisma/client.js';

export async function main(
  databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
) {
  const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: databaseUrl }) });
  // Prisma has no LISTEN: notify: true wakes relays through one pg connection outside Prisma.
  const listenPool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  // The table of the Order model, as `prisma migrate` would create it (migrate needs the schema
  // engine, which an offline machine lacks: see docs/adapters/prisma.md).
  await prisma.$executeRawUnsafe(
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
    database: prismaAdapter(prisma, { notifications: nodePostgres(listenPool) }),
    outboxes: {
      orders: { relay, notify: true },
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

    await delivered;
    await outboxer.stop();
    return {
      delivered: received.map(({ type, groupKey, payload }) => ({ type, groupKey, payload })),
      counts: await outboxer.counts('orders'),
    };
  } finally {
    await outboxer.stop();
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
