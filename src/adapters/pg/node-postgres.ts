import { createHash } from 'node:crypto';
import type { DatabaseAdapter, ListenHandlers, Listener, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';
import { explainFailedTransaction, failedTransaction } from '../shared/failed-transaction.js';

interface QueryResultLike {
  rows: Row[];
}

/** The part of a `pg` client outboxer uses: a `Client` or a `PoolClient` inside a transaction. */
export interface PgTransactionClient {
  /** A text and its values, or pg's query config (a `name` makes it a prepared statement). */
  query(query: string | PgQueryConfig, values?: unknown[]): Promise<QueryResultLike>;
  /** pg >= 8.23: 'I' idle, 'T' in a transaction, 'E' in a failed transaction. */
  getTransactionStatus?(): string | null;
  /**
   * A pool is not a transaction: this makes passing one a type error, whose message (this type)
   * says what to pass instead.
   */
  readonly totalCount?: "pg.Pool is not a transaction: publish with your transaction's client (client = await pool.connect(), then client.query('BEGIN'))";
}

/** A query as pg's config object: with a `name`, pg prepares it once per connection. */
export interface PgQueryConfig {
  readonly name?: string;
  readonly text: string;
  readonly values?: unknown[];
}

interface PgPoolClientLike {
  query(query: string | PgQueryConfig, values?: unknown[]): Promise<QueryResultLike>;
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
  /** A text and its values, or pg's query config (a `name` makes it a prepared statement). */
  query(query: string | PgQueryConfig, values?: unknown[]): Promise<QueryResultLike>;
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
  /**
   * Send the publish INSERT and the relay's fixed statements (poll, acknowledge, settle, lease
   * renewal) as named prepared statements, so Postgres parses and plans each once per connection
   * instead of once per message or batch. Default `true`. PgBouncer in transaction mode supports
   * them from 1.21 with `max_prepared_statements` above 0. Where a pooler does not, the first
   * failing statement turns them off for this adapter: a relay statement runs again unprepared, a
   * publish rejects with a retryable `DATABASE_UNSUPPORTED` error (its transaction is aborted and
   * must be retried). Set `false` behind such a pooler to never send them.
   */
  preparedStatements?: boolean;
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
  const statements = new PreparedStatements(options.preparedStatements ?? true);
  return {
    dialect: postgresDialect,
    sync: false,
    async executeInTransaction(tx, query) {
      assertInTransaction(tx, query);
      try {
        return await statements.runInCallersTransaction(tx, query);
      } catch (error) {
        // pg sets the transaction status when the server is ready again, which can come a tick
        // after the failed statement's rejection: then the INSERT itself meets the failed transaction.
        throw explainFailedTransaction(error);
      }
    },
    execute: (query) => statements.run(pool, query),
    executeAtomically: (queries) => runInTransaction(pool, queries, statements),
    listen: (channel, handlers) =>
      listen(channel, handlers, options.listenClient ?? (() => defaultListenClient(pool))),
  };
}

function assertInTransaction(tx: PgTransactionClient, query: SqlQuery): void {
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
  if (status === 'E' && query.recovers !== true) throw failedTransaction();
}

/**
 * Names for the statements the dialect marks `prepare`, and the switch that turns them off when
 * the connection path cannot keep them (a pooler that does not track prepared statements).
 */
class PreparedStatements {
  private readonly names = new Map<string, string>();

  constructor(private enabled: boolean) {}

  /** Inside a transaction a failed statement aborts it: there the caller's retry runs unprepared. */
  async run(client: Pick<PgPoolLike, 'query'>, query: SqlQuery, inTransaction = false): Promise<Row[]> {
    const name = this.nameOf(query);
    const values = query.values.map(numberArrayLiteral);
    if (name === undefined) return (await client.query(query.text, values)).rows;
    try {
      return (await client.query({ name, text: query.text, values })).rows;
    } catch (error) {
      if (!lostPreparedStatement(error)) throw error;
      this.enabled = false;
      if (inTransaction) throw error;
      // Nothing ran: the statement failed before it was bound.
      return (await client.query(query.text, values)).rows;
    }
  }

  /**
   * A publish in the caller's transaction. A lost prepared statement has aborted that transaction,
   * so nothing can run again here: the caller learns why, and the next attempt runs unprepared.
   */
  async runInCallersTransaction(tx: PgTransactionClient, query: SqlQuery): Promise<Row[]> {
    try {
      return await this.run(tx, query, true);
    } catch (error) {
      if (!lostPreparedStatement(error)) throw error;
      throw new OutboxerError(
        'DATABASE_UNSUPPORTED',
        'The connection path to Postgres lost a prepared statement (a pooler such as PgBouncer in transaction mode without max_prepared_statements). Your transaction was aborted by it: roll it back and retry. This adapter now sends unprepared statements; pass nodePostgres(pool, { preparedStatements: false }) to never prepare them.',
        { cause: error, retryable: true },
      );
    }
  }

  private nameOf(query: SqlQuery): string | undefined {
    if (!this.enabled || query.prepare !== true) return undefined;
    let name = this.names.get(query.text);
    if (name === undefined) {
      name = `outboxer_${createHash('sha256').update(query.text).digest('hex').slice(0, 24)}`;
      this.names.set(query.text, name);
    }
    return name;
  }
}

/**
 * An array of finite numbers (ids, delays) as Postgres' array literal: the same text pg would send,
 * without its per-element escaping, which costs half a millisecond for the 2,000 ids a batch of
 * 1,000 acknowledges and leaves out of the next poll.
 */
function numberArrayLiteral(value: unknown): unknown {
  if (!Array.isArray(value) || value.length === 0) return value;
  for (const element of value) if (typeof element !== 'number' || !Number.isFinite(element)) return value;
  return `{${value.join(',')}}`;
}

/**
 * 26000: the server connection does not know the statement this client prepared; 42P05: it knows
 * one of that name this client did not prepare. Both mean a pooler moved the session.
 */
function lostPreparedStatement(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '26000' || code === '42P05';
}

async function runInTransaction(
  pool: PgPoolLike,
  queries: readonly SqlQuery[],
  statements: PreparedStatements,
): Promise<Row[][]> {
  const client = await pool.connect();
  // A connection that dies while checked out emits 'error' on the client; unheard, that event
  // would end the process. The failed statement already reports it.
  const ignore = (): void => undefined;
  client.on?.('error', ignore);
  let failed: Error | undefined;
  try {
    await client.query('BEGIN');
    const results: Row[][] = [];
    for (const query of queries) results.push(await statements.run(client, query, true));
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
