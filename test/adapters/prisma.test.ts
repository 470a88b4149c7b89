/**
 * Prisma 7 (interactive transactions) through the adapter behaviour suite: on Postgres with the
 * driver adapter @prisma/adapter-pg, on MariaDB with @prisma/adapter-mariadb.
 */
import { PrismaMariaDb } from '@prisma/adapter-mariadb';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { describe, expect, test } from 'vitest';
import { nodePostgres } from 'outboxer/pg';
import { prisma, type PrismaClientLike, type PrismaTransactionClient } from 'outboxer/prisma';
import { adapterBehaviour } from './behaviour.js';
import { loadPrismaClient, type GeneratedPrismaClient } from './prisma/client.js';

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
      // An interactive transaction rolls back when its callback throws.
      rollback: (fn) => rolledBack(client, fn),
      notTransactions: () => ({ 'the PrismaClient': client }),
      async close() {
        await client.$disconnect();
        await listenPool.end();
      },
    };
  },
});

/** Runs `fn` in an interactive transaction, then rolls it back (the callback throws). */
async function rolledBack(client: GeneratedPrismaClient, fn: (tx: PrismaTransactionClient) => unknown) {
  await client
    .$transaction(async (tx) => {
      await fn(tx);
      throw new Rollback();
    })
    .catch((error: unknown) => {
      if (!(error instanceof Rollback)) throw error;
    });
}

// The driver adapter prepares each statement (the binary protocol) unless told to use the text
// protocol, where the connector fills in the values: both, as values come back typed differently.
for (const useTextProtocol of [false, true]) {
  adapterBehaviour<PrismaTransactionClient>({
    name: `Prisma (mysql, @prisma/adapter-mariadb, ${useTextProtocol ? 'text' : 'binary'} protocol)`,
    dialect: 'mysql',
    sync: false,
    async open(target) {
      if (target.kind !== 'mysql') throw new Error('mysql only');
      const { PrismaClient } = await loadPrismaClient('mysql');
      const url = new URL(target.url);
      const client = new PrismaClient({
        adapter: new PrismaMariaDb(
          {
            host: url.hostname,
            port: Number(url.port),
            user: decodeURIComponent(url.username),
            database: target.database,
            connectionLimit: 4,
          },
          { useTextProtocol },
        ),
      });
      return {
        database: prisma(client),
        transaction: (fn) => client.$transaction(async (tx) => fn(tx)),
        rollback: (fn) => rolledBack(client, fn),
        notTransactions: () => ({ 'the PrismaClient': client }),
        close: () => client.$disconnect(),
      };
    },
  });
}

describe('Prisma on MySQL', () => {
  test('the dialect comes from the provider the client was generated for; the option must agree with it', async () => {
    const { PrismaClient } = await loadPrismaClient('mysql');
    const client = new PrismaClient({ adapter: new PrismaMariaDb('mariadb://root@127.0.0.1:3306/test') });
    const onMysql = client as unknown as PrismaClientLike;
    try {
      expect(prisma(onMysql).dialect.name).toBe('mysql');
      expect(prisma(onMysql, { dialect: 'mysql' }).dialect.name).toBe('mysql');
      expect(() => prisma(onMysql, { dialect: 'postgres' })).toThrow(
        expect.objectContaining({
          code: 'INVALID_OPTIONS',
          message: expect.stringMatching(/"prisma.dialect"/),
        }),
      );
    } finally {
      await client.$disconnect();
    }
  });

  test('values come back as the dialect reads them: bigints as numbers, bytes as text, dates as dates', async () => {
    const { PrismaClient } = await loadPrismaClient('mysql');
    const client = new PrismaClient({ adapter: new PrismaMariaDb('mariadb://root@127.0.0.1:3306/test') });
    try {
      const rows = await prisma(client).execute({
        text: `SELECT CAST(? AS SIGNED) AS id, 12345678901234567 AS past_safe, CAST('{"a":1}' AS BINARY) AS bytes,
          TIMESTAMP('2026-01-02 03:04:05') AS at, 1 = 1 AS flag, SUM(2) AS total, NULL AS nothing`,
        values: [Number.MAX_SAFE_INTEGER],
      });
      expect(rows).toHaveLength(1);
      const [row] = rows;
      expect(row).toMatchObject({
        id: Number.MAX_SAFE_INTEGER,
        past_safe: '12345678901234567',
        bytes: '{"a":1}',
        at: new Date('2026-01-02T03:04:05Z'),
        flag: 1,
        nothing: null,
      });
      expect(Number(row!.total)).toBe(2);
    } finally {
      await client.$disconnect();
    }
  });
});
