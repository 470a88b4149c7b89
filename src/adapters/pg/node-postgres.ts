import type { DatabaseAdapter, ListenHandlers, Listener, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';

interface QueryResultLike {
  rows: Row[];
}

/** The part of a `pg` client outboxer uses: a `Client` or a `PoolClient` inside a transaction. */
export interface PgTransactionClient {
  query(text: string, values?: unknown[]): Promise<QueryResultLike>;
  /** pg >= 8.23: 'I' idle, 'T' in a transaction, 'E' in a failed transaction. */
  getTransactionStatus?(): string | null;
  /** A pool is not a transaction: this makes passing one a type error. */
  readonly totalCount?: never;
}

interface PgPoolClientLike {
  query(text: string, values?: unknown[]): Promise<QueryResultLike>;
  release(error?: Error | boolean): void;
  on?(event: 'error', listener: (error: Error) => void): unknown;
  removeListener?(event: 'error', listener: (error: Error) => void): unknown;
}

interface PgListenClientLike {
  connect(): Promise<unknown>;
  query(text: string): Promise<unknown>;
  end(): Promise<void>;
  on(event: 'notification', listener: (message: { channel: string; payload?: string }) => void): unknown;
  on(event: 'error' | 'end', listener: (error?: Error) => void): unknown;
  removeAllListeners(): unknown;
}

/** The part of a `pg.Pool` outboxer uses. */
export interface PgPoolLike {
  query(text: string, values?: unknown[]): Promise<QueryResultLike>;
  connect(): Promise<PgPoolClientLike>;
  /** pg-pool keeps the Client class and the connection options: the listener connects with them. */
  readonly Client?: new (options: unknown) => unknown;
  readonly options?: unknown;
}

export interface NodePostgresOptions {
  /**
   * Makes the dedicated LISTEN connection (used with `notify: true`). Default: a new client of the
   * pool's own `Client` class with the pool's options, outside the pool.
   */
  listenClient?: () => PgListenClientLike;
}

/**
 * The `pg` (node-postgres) adapter. Publish with the client of your transaction; relays and the
 * admin API use the pool.
 *
 * @example
 * import pg from 'pg';
 * import { nodePostgres } from 'outboxer/pg';
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * const outboxer = new Outboxer({ database: nodePostgres(pool), outboxes: { ... } });
 */
export function nodePostgres(
  pool: PgPoolLike,
  options: NodePostgresOptions = {},
): DatabaseAdapter<PgTransactionClient, false> {
  return {
    dialect: postgresDialect,
    sync: false,
    async executeInTransaction(tx, query) {
      assertInTransaction(tx);
      const result = await tx.query(query.text, query.values as unknown[]);
      return result.rows;
    },
    async execute(query) {
      const result = await pool.query(query.text, query.values as unknown[]);
      return result.rows;
    },
    executeAtomically: (queries) => runInTransaction(pool, queries),
    listen: (channel, handlers) =>
      listen(channel, handlers, options.listenClient ?? (() => defaultListenClient(pool))),
  };
}

function assertInTransaction(tx: PgTransactionClient): void {
  if (typeof tx !== 'object' || tx === null || typeof tx.query !== 'function') {
    throw new OutboxerError(
      'NOT_IN_TRANSACTION',
      'publish() needs the pg client of your open transaction as its first argument.',
    );
  }
  if ('totalCount' in tx) {
    throw new OutboxerError(
      'NOT_IN_TRANSACTION',
      'publish() was given a pg Pool. Pass the client of your transaction: const client = await pool.connect(); await client.query("BEGIN"); ...',
    );
  }
  const status = typeof tx.getTransactionStatus === 'function' ? tx.getTransactionStatus() : null;
  if (status === 'I') {
    throw new OutboxerError(
      'NOT_IN_TRANSACTION',
      'publish() was given a pg client that is not inside a transaction. Run BEGIN on it first, so the message commits with your change.',
    );
  }
  if (status === 'E') {
    throw new OutboxerError(
      'NOT_IN_TRANSACTION',
      'publish() was given a pg client whose transaction already failed; roll it back.',
    );
  }
}

async function runInTransaction(pool: PgPoolLike, queries: readonly SqlQuery[]): Promise<Row[][]> {
  const client = await pool.connect();
  // A connection that dies while checked out emits 'error' on the client; unheard, that event
  // would end the process. The failed statement already reports it.
  const ignore = (): void => undefined;
  client.on?.('error', ignore);
  let failed: Error | undefined;
  try {
    await client.query('BEGIN');
    const results: Row[][] = [];
    for (const query of queries)
      results.push((await client.query(query.text, query.values as unknown[])).rows);
    await client.query('COMMIT');
    return results;
  } catch (error) {
    failed = error as Error;
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    // A connection whose rollback may not have run goes back broken, and the pool discards it.
    client.removeListener?.('error', ignore);
    client.release(failed !== undefined && isConnectionError(failed) ? failed : undefined);
  }
}

function isConnectionError(error: Error): boolean {
  return (
    !('code' in error) ||
    typeof (error as { code?: unknown }).code !== 'string' ||
    (error as { code: string }).code.startsWith('08')
  );
}

function defaultListenClient(pool: PgPoolLike): PgListenClientLike {
  if (pool.Client === undefined) {
    throw new OutboxerError(
      'RELAY_MISCONFIGURED',
      'notify: true needs a pg.Pool (or pass listenClient to nodePostgres()).',
    );
  }
  // Named, so operators can tell it apart in pg_stat_activity: `<pool's name>:outboxer-listener`.
  const options = (pool.options ?? {}) as { application_name?: string };
  const name = options.application_name
    ? `${options.application_name}:outboxer-listener`
    : 'outboxer-listener';
  return new pool.Client({ ...options, application_name: name }) as PgListenClientLike;
}

/**
 * LISTEN on one dedicated connection outside the pool. When it drops, it reports the loss (the
 * workers keep polling), reconnects with backoff from 250 ms to 10 s and subscribes again.
 */
async function listen(
  channel: string,
  handlers: ListenHandlers,
  makeClient: () => PgListenClientLike,
): Promise<Listener> {
  let closed = false;
  let client: PgListenClientLike | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let delay = 250;

  const connect = async (): Promise<void> => {
    const next = makeClient();
    next.on('notification', (message) => {
      if (message.channel === channel) handlers.onNotification(message.payload ?? '');
    });
    const lost = (error?: Error): void => {
      if (client !== next) return;
      client = undefined;
      next.removeAllListeners();
      next.on('error', () => undefined);
      void next.end().catch(() => undefined);
      if (closed) return;
      handlers.onStatus(false, error);
      scheduleReconnect();
    };
    next.on('error', lost);
    next.on('end', lost);
    client = next;
    try {
      await next.connect();
      await next.query(`LISTEN "${channel}"`);
    } catch (error) {
      lost(error as Error);
      throw error;
    }
    delay = 250;
    handlers.onStatus(true);
  };

  const scheduleReconnect = (): void => {
    if (closed || retryTimer !== undefined) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      connect().catch(() => undefined);
    }, delay);
    delay = Math.min(delay * 2, 10_000);
  };

  await connect().catch(() => undefined); // Not fatal: workers poll until the listener is back.
  return {
    async close() {
      closed = true;
      clearTimeout(retryTimer);
      const current = client;
      client = undefined;
      if (current !== undefined) {
        current.removeAllListeners();
        current.on('error', () => undefined);
        await current.end().catch(() => undefined);
      }
    },
  };
}
