/**
 * A Postgres database of its own for one run of an example (a MariaDB one for a MySQL example):
 * the examples create the same tables (`orders`, `outboxer_messages`…) in their database's default
 * schema, and test files run in parallel. It is created on the server of DATABASE_URL (MariaDB's:
 * OUTBOXER_TEST_MARIADB_URL) and dropped afterwards, connections and all.
 */
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { MARIADB_URL } from './databases.js';

const defaultUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** Runs `run` with the URL of a new, empty database, then drops that database (even when `run` throws). */
export async function withScratchDatabase<T>(run: (url: string) => Promise<T>): Promise<T> {
  const name = `outboxer_scratch_${process.pid}_${randomBytes(4).toString('hex')}`;
  await onDefaultDatabase((client) => client.query(`CREATE DATABASE ${name}`));
  try {
    const url = new URL(defaultUrl);
    url.pathname = `/${name}`;
    return await run(url.href);
  } finally {
    await onDefaultDatabase(async (client) => {
      // pg's pool.end() resolves before its connections have closed: give them time to go, as a
      // connection FORCE ends reports an error in this process. FORCE is for the connections a
      // failed run left open (PostgreSQL 13 or newer).
      const patience = Date.now() + 10_000;
      while (Date.now() < patience) {
        const { rows } = await client.query<{ connected: number }>(
          'SELECT count(*)::int AS connected FROM pg_stat_activity WHERE datname = $1',
          [name],
        );
        if (rows[0]!.connected === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    });
  }
}

async function onDefaultDatabase(work: (client: pg.Client) => Promise<unknown>): Promise<void> {
  const client = new pg.Client({ connectionString: defaultUrl });
  await client.connect();
  try {
    await work(client);
  } finally {
    await client.end();
  }
}

/**
 * Runs `run` with the URL of a new, empty MySQL/MariaDB database (utf8mb4 with a binary collation,
 * as outboxer's tables are) on the server of OUTBOXER_TEST_MARIADB_URL, then drops it (even when
 * `run` throws): the MySQL examples' counterpart of {@link withScratchDatabase}.
 */
export async function withScratchMysqlDatabase<T>(run: (url: string) => Promise<T>): Promise<T> {
  const name = `outboxer_scratch_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = await mysql.createConnection({ uri: MARIADB_URL });
  try {
    await admin.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`);
    const url = new URL(MARIADB_URL);
    url.pathname = `/${name}`;
    return await run(url.href);
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
    await admin.end();
  }
}

/**
 * The scratch database an example runs in, from its path: a MySQL one for a MySQL example (its
 * name or folder says `mysql`: `kysely-mysql.ts`, `prisma/mysql/example.ts`), a Postgres one
 * otherwise.
 */
export function scratchDatabaseFor(file: string): <T>(run: (url: string) => Promise<T>) => Promise<T> {
  return /mysql/.test(file) ? withScratchMysqlDatabase : withScratchDatabase;
}
