import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { mysql2 } from 'outboxer/mysql2';
import { nodeSqlite } from 'outboxer/node-sqlite';
import { nodePostgres } from 'outboxer/pg';
import type { DatabaseAdapter, PublishInput } from 'outboxer';
import { test } from 'vitest';
import { DatabaseSync, nodeSqliteMissing } from './node-sqlite.js';

export const DATABASE_URL =
  process.env.OUTBOXER_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** A fresh Postgres schema for one test file: nothing leaks between files. */
export async function postgresFixture(poolSize = 10) {
  const schema = `t_${Math.random().toString(36).slice(2, 10)}`;
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
  await admin.query(`CREATE SCHEMA "${schema}"`);
  await admin.end();
  const pool = new pg.Pool({
    connectionString: DATABASE_URL,
    max: poolSize,
    options: `-c search_path=${schema}`,
    application_name: schema,
  });
  return {
    kind: 'postgres' as const,
    schema,
    pool,
    database: nodePostgres(pool) as DatabaseAdapter,
    /** Runs `fn` in a transaction on one client and commits (or rolls back when it throws). */
    async transaction<T>(fn: (tx: pg.PoolClient) => Promise<T>): Promise<T> {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await fn(client);
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK');
        throw error;
      } finally {
        client.release();
      }
    },
    async query(text: string, values: unknown[] = []) {
      return (await pool.query(text, values)).rows;
    },
    async close() {
      await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
      await pool.end();
    },
  };
}

/** A fresh SQLite file in a temporary directory. */
export function sqliteFixture() {
  const dir = mkdtempSync(join(tmpdir(), 'outboxer-'));
  const db = new Database(join(dir, 'test.db'));
  db.pragma('journal_mode = WAL');
  return {
    kind: 'sqlite' as const,
    db,
    database: betterSqlite3(db) as DatabaseAdapter,
    /** better-sqlite3 transactions are synchronous: `fn` must not be async. */
    async transaction<T>(fn: (tx: Database.Database) => T): Promise<T> {
      return db.transaction(() => {
        const value = fn(db);
        if (value instanceof Promise) throw new Error('sqliteFixture.transaction: fn must be synchronous');
        return value;
      })();
    },
    async query(text: string, values: unknown[] = []) {
      const statement = db.prepare(text);
      return statement.reader
        ? (statement.all(...values) as Record<string, unknown>[])
        : (statement.run(...values), []);
    },
    async close() {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A fresh SQLite file opened with Node's built-in `node:sqlite` (Node 22.16+; see
 * `./node-sqlite.ts` for where it is missing). Same shape as {@link sqliteFixture}.
 */
export function nodeSqliteFixture() {
  if (DatabaseSync === undefined) throw new Error('nodeSqliteFixture: this Node has no usable node:sqlite');
  const dir = mkdtempSync(join(tmpdir(), 'outboxer-'));
  const db = new DatabaseSync(join(dir, 'test.db'), { timeout: 5_000 });
  db.exec('PRAGMA journal_mode = WAL');
  return {
    kind: 'sqlite' as const,
    db,
    database: nodeSqlite(db) as DatabaseAdapter,
    /** node:sqlite transactions are BEGIN … COMMIT around synchronous code: `fn` must not be async. */
    async transaction<T>(fn: (tx: typeof db) => T): Promise<T> {
      db.exec('BEGIN');
      try {
        const value = fn(db);
        if (value instanceof Promise)
          throw new Error('nodeSqliteFixture.transaction: fn must be synchronous');
        db.exec('COMMIT');
        return value;
      } catch (error) {
        if (db.isTransaction) db.exec('ROLLBACK');
        throw error;
      }
    },
    async query(text: string, values: unknown[] = []) {
      return db.prepare(text).all({}, ...(values as never[])) as Record<string, unknown>[];
    },
    async close() {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export const MARIADB_URL = process.env.OUTBOXER_TEST_MARIADB_URL ?? 'mysql://root@127.0.0.1:3306/test';

/** A fresh MariaDB (MySQL) database for one test file, the counterpart of a Postgres schema. */
export async function mariadbFixture(poolSize = 10) {
  const database = `t_${Math.random().toString(36).slice(2, 10)}`;
  const admin = await mysql.createConnection({ uri: MARIADB_URL });
  await admin.query(`CREATE DATABASE \`${database}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`);
  await admin.end();
  const url = new URL(MARIADB_URL);
  url.pathname = `/${database}`;
  const pool = mysql.createPool({ uri: url.toString(), connectionLimit: poolSize });
  return {
    kind: 'mysql' as const,
    /** The database, as `schema` is the Postgres fixture's schema. */
    schema: database,
    url: url.toString(),
    pool,
    database: mysql2(pool) as DatabaseAdapter,
    /** Runs `fn` in a transaction on one connection and commits (or rolls back when it throws). */
    async transaction<T>(fn: (tx: mysql.PoolConnection) => Promise<T>): Promise<T> {
      const connection = await pool.getConnection();
      try {
        await connection.beginTransaction();
        const result = await fn(connection);
        await connection.commit();
        return result;
      } catch (error) {
        await connection.rollback();
        throw error;
      } finally {
        connection.release();
      }
    },
    /**
     * A statement of the test itself, with ANSI_QUOTES on for it, so that the suites' SQL quotes
     * identifiers as on Postgres and SQLite (`"t"`, `"partition"`); outboxer's own statements run
     * in the server's default mode, as they do for users.
     */
    async query(text: string, values: unknown[] = []) {
      const connection = await pool.getConnection();
      try {
        await connection.query(`SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')`);
        const [rows] = await connection.query(text, values);
        return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : [];
      } finally {
        await connection.query('SET SESSION sql_mode = DEFAULT');
        connection.release();
      }
    },
    async close() {
      await pool.query(`DROP DATABASE \`${database}\``);
      await pool.end();
    },
  };
}

export type Fixture =
  | Awaited<ReturnType<typeof postgresFixture>>
  | ReturnType<typeof sqliteFixture>
  | Awaited<ReturnType<typeof mariadbFixture>>;

/** A fixture of the engine suites: {@link Fixture}, or SQLite through node:sqlite. */
export type EngineFixture = Fixture | ReturnType<typeof nodeSqliteFixture>;

export const fixtures: Array<{ name: 'postgres' | 'sqlite' | 'mariadb'; make: () => Promise<Fixture> }> = [
  { name: 'sqlite', make: async () => sqliteFixture() },
  { name: 'postgres', make: () => postgresFixture() },
  { name: 'mariadb', make: () => mariadbFixture() },
];

/**
 * The fixtures of the engine suites (test/engine, test/cluster), which reach the database only
 * through the fixture: {@link fixtures}, and SQLite through node:sqlite where this Node has it.
 * Where it does not, each suite calls {@link reportSkippedFixtures}, which reports it as skipped.
 */
export const engineFixtures: Array<{
  name: 'postgres' | 'sqlite' | 'mariadb' | 'node_sqlite';
  make: () => Promise<EngineFixture>;
}> = [
  ...fixtures,
  ...(DatabaseSync ? [{ name: 'node_sqlite' as const, make: async () => nodeSqliteFixture() }] : []),
];

/**
 * Where this Node has no usable node:sqlite, registers one skipped test that says which suite did
 * not run on it and why, so that the missing fixture shows in the skipped count, never as a pass.
 */
export function reportSkippedFixtures(suite: string): void {
  if (nodeSqliteMissing !== undefined)
    test.skip(`${suite} on node_sqlite: ${nodeSqliteMissing}`, () => undefined);
}

/**
 * The fixtures of the suites that do not run on MariaDB yet (the CLI, reliability and property
 * suites): issue 19 brought the engine and cluster suites to it first.
 */
export const postgresAndSqlite = fixtures.filter((f) => f.name !== 'mariadb') as Array<{
  name: 'postgres' | 'sqlite';
  make: () => Promise<PostgresOrSqliteFixture>;
}>;

export type PostgresOrSqliteFixture =
  Awaited<ReturnType<typeof postgresFixture>> | ReturnType<typeof sqliteFixture>;

/** A table name quoted for the fixture's database: backticks on MariaDB, double quotes elsewhere. */
export function quoted(fixture: Pick<Fixture, 'kind'>, name: string): string {
  return fixture.kind === 'mysql' ? `\`${name}\`` : `"${name}"`;
}

class Rollback extends Error {}

/**
 * Publishes `inputs` with publishMany in one transaction of the fixture's database; with
 * `rollback`, the transaction is rolled back after the publish. Returns the ids (even when rolled back).
 */
export async function publishInTransaction(
  fixture: EngineFixture,
  outboxer: { publishMany(tx: never, inputs: readonly PublishInput[]): unknown },
  inputs: readonly PublishInput[],
  options: { rollback?: boolean } = {},
): Promise<number[]> {
  let ids: number[] = [];
  try {
    if (fixture.kind === 'sqlite') {
      await fixture.transaction((tx) => {
        ids = outboxer.publishMany(tx as never, inputs) as number[];
        if (options.rollback) throw new Rollback();
      });
    } else {
      await fixture.transaction(async (tx) => {
        ids = (await outboxer.publishMany(tx as never, inputs)) as number[];
        if (options.rollback) throw new Rollback();
      });
    }
  } catch (error) {
    if (!(error instanceof Rollback)) throw error;
  }
  return ids;
}
