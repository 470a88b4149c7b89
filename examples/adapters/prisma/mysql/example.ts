/**
 * outboxer with Prisma 7 (driver adapter @prisma/adapter-mariadb) on MySQL or MariaDB: publish
 * inside an interactive transaction, and the order and its event commit together, or not at all.
 *
 * PrismaClient is the client `npx prisma generate` writes from schema.prisma (next to this file)
 * into ./generated/prisma (offline: see docs/adapters/prisma.md).
 *
 *   npx prisma generate --schema examples/adapters/prisma/mysql/schema.prisma
 *   npx tsx examples/adapters/prisma/mysql/example.ts      (DATABASE_URL, default mysql://root@127.0.0.1:3306/test)
 */
import { pathToFileURL } from 'node:url';
import { PrismaMariaDb } from '@prisma/adapter-mariadb';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { prisma as prismaAdapter } from 'outboxer/prisma';
import { PrismaClient } from './generated/prisma/client.js';

export async function main(databaseUrl = process.env.DATABASE_URL ?? 'mysql://root@127.0.0.1:3306/test') {
  // The MariaDB driver adapter speaks to MySQL 8 as well; it takes mysql:// and mariadb:// URLs.
  const prisma = new PrismaClient({ adapter: new PrismaMariaDb(databaseUrl) });
  // The table of the Order model, as `prisma migrate` would create it (migrate needs the schema
  // engine, which an offline machine lacks: see docs/adapters/prisma.md).
  await prisma.$executeRawUnsafe(
    `CREATE TABLE IF NOT EXISTS orders (id INT AUTO_INCREMENT PRIMARY KEY, customer VARCHAR(191) NOT NULL, total INT NOT NULL)`,
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
    // The dialect comes from the client's provider (mysql): MySQL's statements, `?` placeholders.
    database: prismaAdapter(prisma),
    outboxes: {
      // MySQL has no LISTEN/NOTIFY: relays poll, and this instance wakes its own relay on publish.
      orders: { relay, pollInterval: 500 },
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
