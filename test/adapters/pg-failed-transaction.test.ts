/**
 * A publish into a pg transaction that an earlier statement has failed is `NOT_IN_TRANSACTION`,
 * whether the client already reports the failure (`getTransactionStatus()` 'E') or the INSERT
 * itself meets it (Postgres' 25P02): pg learns the status from the server's ReadyForQuery, which
 * Postgres sends after the error, so it can arrive after the failed statement has rejected.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, isOutboxerError } from 'outboxer';
import { nodePostgres, type PgTransactionClient } from 'outboxer/pg';
import { DATABASE_URL, postgresFixture } from '../support/databases.js';
import { sleep, waitUntil } from '../support/random.js';

type PgFixture = Awaited<ReturnType<typeof postgresFixture>>;

/**
 * A TCP proxy to Postgres that holds back whatever the server sends after an ErrorResponse for
 * `delay` ms: the network (or a pooler) splitting the error from the ReadyForQuery that follows it.
 */
async function proxyDelayingAfterErrors(delay: number): Promise<{ port: number; close(): Promise<void> }> {
  const target = new URL(DATABASE_URL);
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = createConnection({ host: target.hostname, port: Number(target.port || 5432) });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    // Server messages are typed: one byte of type, then an int32 length that counts itself.
    let pending = Buffer.alloc(0);
    let sending = Promise.resolve();
    upstream.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 5 && pending.length >= 1 + pending.readInt32BE(1)) {
        const message = pending.subarray(0, 1 + pending.readInt32BE(1));
        pending = pending.subarray(message.length);
        sending = sending.then(async () => {
          client.write(message);
          if (message[0] === 0x45 /* 'E' */) await sleep(delay);
        });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function publishError(publishing: Promise<unknown>): Promise<unknown> {
  return publishing.then(
    () => {
      throw new Error('publish succeeded in a failed transaction');
    },
    (error: unknown) => error,
  );
}

describe('publish in a pg transaction that already failed', () => {
  let fixture: PgFixture;
  let outboxer: Outboxer<PgTransactionClient>;

  beforeAll(async () => {
    fixture = await postgresFixture(1);
    outboxer = new Outboxer({
      database: nodePostgres(fixture.pool),
      relay: false,
      outboxes: { events: { table: 'failed_tx' } },
    });
    await outboxer.migrate();
  });
  afterAll(async () => {
    await outboxer.close();
    await fixture.close();
  });

  test('right after the failed statement, before pg has the failed status: NOT_IN_TRANSACTION with the 25P02 error as cause', async () => {
    const proxy = await proxyDelayingAfterErrors(150);
    const url = new URL(DATABASE_URL);
    url.host = `127.0.0.1:${proxy.port}`;
    const pool = new pg.Pool({
      connectionString: url.href,
      max: 1,
      options: `-c search_path=${fixture.schema}`,
    });
    const late = new Outboxer({
      database: nodePostgres(pool),
      relay: false,
      outboxes: { events: { table: 'failed_tx' } },
    });
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await expect(client.query('SELECT 1 / 0')).rejects.toMatchObject({ code: '22012' });
      expect(client.getTransactionStatus()).toBe('T'); // The ReadyForQuery saying 'E' is still on its way.
      const error = await publishError(late.publish(client, 'events', { n: 1 }));
      expect(isOutboxerError(error) && error.code).toBe('NOT_IN_TRANSACTION');
      expect(error).toMatchObject({
        message: expect.stringMatching(/transaction that already failed.*must be rolled back/),
        retryable: false,
        cause: expect.objectContaining({ code: '25P02' }),
      });
      expect(client.getTransactionStatus()).toBe('E');
      await client.query('ROLLBACK');
      // The connection is fine once rolled back; its failed Parse left no prepared statement behind.
      await client.query('BEGIN');
      await late.publish(client, 'events', { n: 2 });
      await client.query('COMMIT');
    } finally {
      client.release();
      await late.close();
      await pool.end();
      await proxy.close();
    }
    const payloads = await fixture.query('SELECT payload::text AS p FROM failed_tx');
    expect(payloads.map((row) => row.p)).toEqual(['{"n":2}']);
    await fixture.query('TRUNCATE failed_tx, failed_tx_tallies');
  });

  test('with the failed statement still in flight: the INSERT meets the failed transaction, NOT_IN_TRANSACTION', async () => {
    const client = await fixture.pool.connect();
    try {
      await client.query('BEGIN');
      const failing = client.query('SELECT 1 / 0').catch((error: unknown) => error);
      const error = await publishError(outboxer.publish(client, 'events', { n: 1 }));
      expect(await failing).toMatchObject({ code: '22012' });
      expect(error).toMatchObject({
        code: 'NOT_IN_TRANSACTION',
        cause: expect.objectContaining({ code: '25P02' }),
      });
      await client.query('ROLLBACK');
      // The prepared INSERT works on this connection afterwards.
      await client.query('BEGIN');
      await outboxer.publish(client, 'events', { n: 2 });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const prepared = await fixture.query(
      `SELECT name FROM pg_prepared_statements WHERE statement LIKE 'WITH inserted AS (INSERT INTO "failed_tx"%'`,
    );
    expect(prepared).toHaveLength(1);
    const payloads = await fixture.query('SELECT payload::text AS p FROM failed_tx');
    expect(payloads.map((row) => row.p)).toEqual(['{"n":2}']);
    await fixture.query('TRUNCATE failed_tx, failed_tx_tallies');
  });

  test('once pg reports the failed status: NOT_IN_TRANSACTION without sending the INSERT', async () => {
    const client = await fixture.pool.connect();
    const sent: string[] = [];
    const watched = Object.assign(Object.create(client) as pg.PoolClient, {
      query: (query: string | { text: string }, values?: unknown[]) => {
        sent.push(typeof query === 'string' ? query : query.text);
        return client.query(query as string, values);
      },
    });
    try {
      await client.query('BEGIN');
      await client.query('SELECT 1 / 0').catch(() => undefined);
      // Usually at once; under load the ReadyForQuery can come later (the case of the first test).
      await waitUntil(() => client.getTransactionStatus() === 'E', 5_000, "pg's failed status");
      const error = await publishError(outboxer.publish(watched, 'events', { n: 1 }));
      expect(error).toMatchObject({
        code: 'NOT_IN_TRANSACTION',
        message: expect.stringMatching(/transaction that already failed.*must be rolled back/),
      });
      expect(sent).toEqual([]);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });
});
