/** Prisma 7 (driver adapter @prisma/adapter-pg, interactive transactions) through the adapter behaviour suite. */
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { nodePostgres } from 'outboxer/pg';
import { prisma, type PrismaTransactionClient } from 'outboxer/prisma';
import { adapterBehaviour } from './behaviour.js';
import { loadPrismaClient } from './prisma/client.js';

class Rollback extends Error {}

adapterBehaviour<PrismaTransactionClient>({
  name: 'Prisma',
  dialect: 'postgres',
  sync: false,
  async open(target) {
    if (target.kind !== 'postgres') throw new Error('postgres only');
    const { PrismaClient } = await loadPrismaClient();
    const client = new PrismaClient({
      adapter: new PrismaPg({ connectionString: target.urlWithSchema, max: 4 }),
    });
    // Prisma has no LISTEN: notify: true listens through a pg pool on the same database.
    const listenPool = new pg.Pool({ connectionString: target.urlWithSchema, max: 1 });
    return {
      database: prisma(client, { notifications: nodePostgres(listenPool) }),
      transaction: (fn) => client.$transaction(async (tx) => fn(tx)),
      async rollback(fn) {
        // An interactive transaction rolls back when its callback throws.
        await client
          .$transaction(async (tx) => {
            await fn(tx);
            throw new Rollback();
          })
          .catch((error: unknown) => {
            if (!(error instanceof Rollback)) throw error;
          });
      },
      notTransactions: () => ({ 'the PrismaClient': client }),
      async close() {
        await client.$disconnect();
        await listenPool.end();
      },
    };
  },
});
