import type { DatabaseAdapter, ListenHandlers, Listener, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { invalidOption } from '../../core/options.js';
import { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';
import { postgresText } from '../shared/postgres-values.js';
import { timestampsAsDates } from '../shared/timestamps.js';
import { resolveRelaySide, type DataLayerOptions, type EngineSide } from '../shared/engine-side.js';
import { explainingFailedTransaction } from '../shared/failed-transaction.js';

/** Postgres' `unknown` type: the server infers the parameter's type as it does for a quoted literal. */
const UNKNOWN_OID = 705;

interface PostgresJsQueryable {
  unsafe(query: string, parameters?: never[]): PromiseLike<readonly Row[]>;
  /** `sql.typed(value, oid)`: a parameter sent with the given type. */
  typed(value: never, oid: number): unknown;
}

/**
 * The `sql` that `sql.begin(async (sql) => …)` passes to its callback (postgres.js's
 * `TransactionSql`). The root `sql` is not one: it has no `savepoint` and has `begin`, so passing
 * it is a type error.
 */
export interface PostgresJsTransaction extends PostgresJsQueryable {
  savepoint(...args: never[]): unknown;
  readonly begin?: never;
}

/** The part of a postgres.js root `sql` (from `postgres(url)`) outboxer uses. */
export interface PostgresJsSql extends PostgresJsQueryable {
  begin<T>(fn: (sql: PostgresJsTransaction) => T | Promise<T>): PromiseLike<unknown>;
  listen(
    channel: string,
    onNotify: (payload: string) => void,
    onListen?: () => void,
  ): PromiseLike<{ unlisten(): Promise<void> }>;
  readonly options?: { readonly transform?: unknown };
}

/**
 * The postgres.js adapter. Publish with the `sql` of `sql.begin(async (sql) => …)`; relays and
 * the admin API use the root `sql`, and `notify: true` listens with `sql.listen` (one dedicated
 * connection that postgres.js reconnects and subscribes again).
 *
 * Parameters are sent with Postgres' `unknown` type so the server reads them as it reads quoted
 * literals: postgres.js's own serializers would write a JSON text as a JSON string and an array of
 * booleans as one boolean.
 *
 * @example
 * import postgres from 'postgres';
 * import { postgresJs } from 'outboxer/postgres-js';
 * const sql = postgres(process.env.DATABASE_URL);
 * const outboxer = new Outboxer({ database: postgresJs(sql), outboxes: { orders: { relay } } });
 * await sql.begin(async (tx) => {
 *   await tx`INSERT INTO orders ${tx(order)}`;
 *   await outboxer.publish(tx, 'orders', order, { groupKey: `order:${order.id}` });
 * });
 */
export function postgresJs(
  sql: PostgresJsSql,
  options?: DataLayerOptions,
): DatabaseAdapter<PostgresJsTransaction, false> {
  if (!isSqlFunction(sql)) {
    throw invalidOption('postgresJs', 'the sql function returned by postgres(url)', sql);
  }
  const own: EngineSide = {
    async execute(query) {
      assertUntransformed(sql);
      return run(sql, query);
    },
    async executeAtomically(queries) {
      assertUntransformed(sql);
      let results: Row[][] = [];
      await sql.begin(async (tx) => {
        results = [];
        for (const query of queries) results.push(await run(tx, query));
      });
      return results;
    },
    listen: (channel, handlers) => listen(sql, channel, handlers),
  };
  return {
    dialect: postgresDialect,
    sync: false,
    executeInTransaction(tx, query) {
      assertTransaction(tx);
      return explainingFailedTransaction(run(tx, query));
    },
    ...resolveRelaySide('postgresJs', postgresDialect, own, options),
  };
}

async function run(sql: PostgresJsQueryable, query: SqlQuery): Promise<Row[]> {
  const parameters = query.values.map((value) =>
    sql.typed((value === null || value === undefined ? null : postgresText(value)) as never, UNKNOWN_OID),
  );
  const rows = await sql.unsafe(query.text, parameters as never[]);
  // Timestamps as dates whatever the sql's parsers say: Drizzle's postgres-js driver, for one, makes its client return text.
  return timestampsAsDates(
    rows as Row[],
    (rows as { columns?: ReadonlyArray<{ name: string; type: number }> }).columns,
  );
}

/** A postgres.js `sql` is a function (the tagged template) with methods. */
function isSqlFunction(value: unknown): boolean {
  return typeof value === 'function' && typeof (value as { unsafe?: unknown }).unsafe === 'function';
}

function assertTransaction(tx: PostgresJsTransaction): void {
  if (!isSqlFunction(tx)) {
    throw new OutboxerError(
      'NOT_IN_TRANSACTION',
      'publish() needs the sql of your transaction: await sql.begin(async (tx) => { await outboxer.publish(tx, ...) }).',
    );
  }
  if (typeof tx.savepoint !== 'function' || typeof (tx as { begin?: unknown }).begin === 'function') {
    throw new OutboxerError(
      'NOT_IN_TRANSACTION',
      'publish() was given the root postgres.js sql (or a reserved connection), not a transaction. Publish with the sql that sql.begin(async (tx) => ...) passes to its callback.',
    );
  }
}

/** Relays read rows by their column names (`group_key`): a column transform (postgres.camel) would rename them. */
function assertUntransformed(sql: PostgresJsSql): void {
  const transform = sql.options?.transform as
    { column?: { from?: unknown }; value?: { from?: unknown }; row?: { from?: unknown } } | undefined;
  if (transform?.column?.from || transform?.value?.from || transform?.row?.from) {
    throw new OutboxerError(
      'DATABASE_UNSUPPORTED',
      'postgresJs(sql): relays cannot read rows through a sql with a result transform (such as postgres.camel). Pass a second postgres() without transform as relayDatabase: postgresJs(postgres(url)), or nodePostgres(pool).',
    );
  }
}

async function listen(sql: PostgresJsSql, channel: string, handlers: ListenHandlers): Promise<Listener> {
  let closed = false;
  let subscription: { unlisten(): Promise<void> } | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let delay = 250;
  // postgres.js keeps one listening connection per sql, outside its pool, and after a lost
  // connection reconnects and calls onListen again; it does not report the loss (workers keep
  // polling meanwhile). A first LISTEN that fails is retried here, with backoff up to 10 s.
  const subscribe = async (): Promise<void> => {
    try {
      const current = await sql.listen(
        channel,
        (payload) => {
          if (!closed) handlers.onNotification(payload);
        },
        () => {
          if (!closed) handlers.onStatus(true);
        },
      );
      if (closed) await current.unlisten().catch(() => undefined);
      else subscription = current;
    } catch (error) {
      if (closed) return;
      handlers.onStatus(false, error);
      retryTimer = setTimeout(() => {
        retryTimer = undefined;
        void subscribe();
      }, delay);
      delay = Math.min(delay * 2, 10_000);
    }
  };
  await subscribe();
  return {
    async close() {
      closed = true;
      clearTimeout(retryTimer);
      await subscription?.unlisten().catch(() => undefined);
      subscription = undefined;
    },
  };
}
