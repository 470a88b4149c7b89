/**
 * Prisma (interactive transactions) through the adapter behaviour suite, on Prisma 7 and on Prisma 6
 * (6.19, where many users remain; installed as npm aliases, its clients generated with
 * engineType = "client", the Rust-free client): on Postgres with the driver adapter
 * @prisma/adapter-pg, on MariaDB with @prisma/adapter-mariadb.
 */
import { PrismaMariaDb } from '@prisma/adapter-mariadb';
import { PrismaPg } from '@prisma/adapter-pg';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { PrismaMariaDb as PrismaMariaDbV6 } from 'prisma-adapter-mariadb-v6';
import { PrismaPg as PrismaPgV6 } from 'prisma-adapter-pg-v6';
import { describe, expect, test } from 'vitest';
import { mysql2 } from 'outboxer/mysql2';
import { nodePostgres } from 'outboxer/pg';
import { prisma, type PrismaClientLike, type PrismaTransactionClient } from 'outboxer/prisma';
import { adapterBehaviour } from './behaviour.js';
import { loadPrismaClient, type GeneratedPrismaClient, type PrismaLine } from './prisma/client.js';

class Rollback extends Error {}

/**
 * Each Prisma line with its driver adapters, and the protocols its MariaDB adapter speaks: Prisma 7's
 * prepares each statement (the binary protocol) unless told to use the text protocol, where the
 * connector fills in the values (both, as values come back typed differently); Prisma 6's has the
 * text protocol only.
 */
const prismaLines: {
  line: PrismaLine;
  PrismaPg: typeof PrismaPg;
  PrismaMariaDb: typeof PrismaMariaDb;
  useTextProtocol: boolean[];
}[] = [
  { line: 7, PrismaPg, PrismaMariaDb, useTextProtocol: [false, true] },
  { line: 6, PrismaPg: PrismaPgV6, PrismaMariaDb: PrismaMariaDbV6, useTextProtocol: [true] },
];

for (const { line, PrismaPg, PrismaMariaDb, useTextProtocol: protocols } of prismaLines) {
  adapterBehaviour<PrismaTransactionClient>({
    name: `Prisma ${line}`,
    dialect: 'postgres',
    sync: false,
    async open(target) {
      if (target.kind !== 'postgres') throw new Error('postgres only');
      const { PrismaClient } = await loadPrismaClient('postgresql', line);
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

  for (const useTextProtocol of protocols) {
    adapterBehaviour<PrismaTransactionClient>({
      name: `Prisma ${line} (mysql, @prisma/adapter-mariadb, ${useTextProtocol ? 'text' : 'binary'} protocol)`,
      dialect: 'mysql',
      sync: false,
      async open(target) {
        if (target.kind !== 'mysql') throw new Error('mysql only');
        const { PrismaClient } = await loadPrismaClient('mysql', line);
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
            // Prisma 6's adapter has no such option (and always speaks the text protocol).
            line === 7 ? { useTextProtocol } : {},
          ),
        });
        // Prisma 6's MariaDB adapter cannot read outboxer's tables: the relay side runs on mysql2.
        const pool = line === 6 ? mysql.createPool({ uri: target.url, connectionLimit: 4 }) : undefined;
        return {
          database: prisma(client, pool && { relayDatabase: mysql2(pool) }),
          transaction: (fn) => client.$transaction(async (tx) => fn(tx)),
          rollback: (fn) => rolledBack(client, fn),
          notTransactions: () => ({ 'the PrismaClient': client }),
          async close() {
            await client.$disconnect();
            await pool?.end();
          },
        };
      },
    });
  }
}

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

for (const { line, PrismaMariaDb } of prismaLines) {
  describe(`Prisma ${line} on MySQL`, () => {
    test('the dialect comes from the provider the client was generated for; the option must agree with it', async () => {
      const { PrismaClient } = await loadPrismaClient('mysql', line);
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
      const { PrismaClient } = await loadPrismaClient('mysql', line);
      const client = new PrismaClient({ adapter: new PrismaMariaDb('mariadb://root@127.0.0.1:3306/test') });
      try {
        // In a transaction, as a publish reads them (Prisma 6 on MariaDB runs nothing else).
        const rows = await client.$transaction(async (tx) =>
          prisma(client).executeInTransaction(tx, {
            text: `SELECT CAST(? AS SIGNED) AS id, 12345678901234567 AS past_safe, CAST('{"a":1}' AS BINARY) AS bytes,
            TIMESTAMP('2026-01-02 03:04:05') AS at, 1 = 1 AS flag, SUM(2) AS total, NULL AS nothing`,
            values: [Number.MAX_SAFE_INTEGER],
          }),
        );
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

    if (line === 6) {
      test('on Prisma 6 the relay side asks for relayDatabase: its MariaDB adapter cannot read utf8mb4_bin text', async () => {
        const { PrismaClient } = await loadPrismaClient('mysql', line);
        const client = new PrismaClient({ adapter: new PrismaMariaDb('mariadb://root@127.0.0.1:3306/test') });
        try {
          const adapter = prisma(client);
          await expect(adapter.execute({ text: 'SELECT 1', values: [] })).rejects.toMatchObject({
            code: 'DATABASE_UNSUPPORTED',
            message: expect.stringContaining('relayDatabase: mysql2(pool)'),
          });
          await expect(adapter.executeAtomically([])).rejects.toMatchObject({ code: 'DATABASE_UNSUPPORTED' });
          // What the adapter steps around: Prisma 6 refuses a text column with a binary collation.
          await expect(
            client.$queryRawUnsafe(`SELECT CAST('x' AS CHAR) COLLATE utf8mb4_bin AS text`),
          ).rejects.toThrow(/Cannot serialize value of type string as Bytes/);
        } finally {
          await client.$disconnect();
        }
      });
    }
  });
}
