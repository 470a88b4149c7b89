import type { Dialect, ListenHandlers, Row } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { mysql2, type Mysql2PoolLike } from '../mysql2/mysql2.js';
import { nodePostgres, type PgPoolLike, type PgQueryConfig } from '../pg/node-postgres.js';
import type { EngineSide } from '../shared/engine-side.js';
import { timestampsAsDates } from '../shared/timestamps.js';

/** What MikroORM's connection gives for its driver's own pool: `pg`'s `Pool` or mysql2's (callback) `Pool`. */
export interface MikroOrmNativeConnection {
  getNativeClient(): Promise<unknown>;
}

interface PgResultLike {
  rows: Row[];
  fields?: ReadonlyArray<{ name: string; dataTypeID: number }>;
}

interface PgQueryable {
  query(query: string | PgQueryConfig, values?: unknown[]): Promise<PgResultLike>;
}

/**
 * The relay side on the pool of the ORM's own driver (`connection.getNativeClient()`), through the
 * `outboxer/pg` and `outboxer/mysql2` adapters, with real parameters. MikroORM's own `execute()`
 * writes values into the text and its Kysely results carry no column types, which the relay side
 * needs on Postgres (below). The pool is asked for once, at the first statement, so an adapter
 * whose `relayDatabase` replaces this side never touches it.
 */
export function nativeRelaySide(connection: MikroOrmNativeConnection, dialect: Dialect): EngineSide {
  let side: Promise<EngineSide> | undefined;
  const resolved = (): Promise<EngineSide> => {
    side ??= connection.getNativeClient().then(
      (client) => fromNativeClient(client, dialect),
      (error: unknown) => {
        side = undefined; // not connected yet, say: the next statement asks again
        throw error;
      },
    );
    return side;
  };
  return {
    execute: async (query) => (await resolved()).execute(query),
    executeAtomically: async (queries) => (await resolved()).executeAtomically(queries),
    ...(dialect.name === 'postgres'
      ? {
          listen: async (channel: string, handlers: ListenHandlers) => {
            const own = await resolved();
            return own.listen!(channel, handlers);
          },
        }
      : {}),
  };
}

function fromNativeClient(client: unknown, dialect: Dialect): EngineSide {
  const candidate = client as Partial<PgPoolLike & { promise(): Mysql2PoolLike }> | null;
  if (dialect.name === 'mysql' && typeof candidate?.promise === 'function') {
    // mysql2's callback pool: its promise() wrapper is what outboxer/mysql2 takes.
    return mysql2(candidate.promise());
  }
  if (dialect.name === 'postgres' && typeof candidate?.connect === 'function') {
    return nodePostgres(withDates(candidate as PgPoolLike));
  }
  throw new OutboxerError(
    'DATABASE_UNSUPPORTED',
    `mikroOrm(orm): the ORM's driver pool (${(candidate as object | null)?.constructor?.name ?? String(client)}) is not ${dialect.name === 'mysql' ? "mysql2's (@mikro-orm/mysql, @mikro-orm/mariadb)" : "pg's (@mikro-orm/postgresql)"}, which dialect "${dialect.name}" needs. Check mikroOrm's dialect option, or pass relayDatabase.`,
  );
}

/**
 * The ORM's `pg` pool with timestamps read as dates again: MikroORM makes its connections return
 * them as text, and the engine reads `inserted_at` and the lease times as dates. `fields` says
 * which columns are timestamps. The pool's `Client` and `options` stay reachable, so that LISTEN
 * opens its dedicated connection as the ORM's pool would.
 */
function withDates(pool: PgPoolLike): PgPoolLike {
  const reading =
    (client: PgQueryable) =>
    async (query: string | PgQueryConfig, values?: unknown[]): Promise<{ rows: Row[] }> => {
      const result = await client.query(query, values);
      const columns = result.fields?.map((field) => ({ name: field.name, type: field.dataTypeID }));
      return { rows: timestampsAsDates(result.rows, columns) };
    };
  return {
    query: reading(pool as PgQueryable),
    async connect() {
      const client = await pool.connect();
      return {
        query: reading(client as PgQueryable),
        release: (error) => client.release(error),
        on: (event, listener) => client.on?.(event, listener),
        removeListener: (event, listener) => client.removeListener?.(event, listener),
      };
    },
    ...(pool.Client === undefined ? {} : { Client: pool.Client }),
    ...(pool.options === undefined ? {} : { options: pool.options }),
  };
}
