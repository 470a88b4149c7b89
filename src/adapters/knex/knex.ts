import type { DatabaseAdapter, Dialect, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { invalidOption } from '../../core/options.js';
import { mysqlDialect } from '../../dialects/mysql/mysql-dialect.js';
import { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';
import { ENGINE_ISOLATION_LEVEL, mysqlRows, mysqlRowsInTransaction } from '../shared/mysql-results.js';
import { toQuestionMarks } from '../shared/placeholders.js';
import { withArrayLiterals } from '../shared/postgres-values.js';
import { timestampsAsDates } from '../shared/timestamps.js';
import { resolveRelaySide, type DataLayerOptions, type EngineSide } from '../shared/engine-side.js';
import { explainingFailedTransaction } from '../shared/failed-transaction.js';

interface KnexRaw {
  /** `knex.raw(sql, bindings)`: `?` placeholders, `\?` for a literal question mark. */
  raw(sql: string, bindings: readonly unknown[]): PromiseLike<unknown>;
}

/**
 * A `Knex.Transaction`: the `trx` of `knex.transaction(async (trx) => …)` or of
 * `await knex.transaction()`. A `Knex` instance has no `isCompleted()`, so passing it is a type
 * error.
 */
export interface KnexTransaction extends KnexRaw {
  isCompleted(): boolean;
  readonly isTransaction?: boolean;
}

/** The part of a `Knex` instance (on the `pg` or the `mysql2` client) outboxer uses. */
export interface KnexLike extends KnexRaw {
  transaction<T>(
    fn: (trx: KnexTransaction) => Promise<T>,
    config?: { isolationLevel?: typeof ENGINE_ISOLATION_LEVEL },
  ): PromiseLike<T>;
  /** `dialect` is `postgresql` for the `pg` client, `mysql` for `mysql` and `mysql2`. */
  readonly client: { readonly dialect?: string; readonly driverName?: string };
}

/** How a publish on Knex is opened, for the errors' messages. */
const USAGE = 'Publish with the trx of knex.transaction(async (trx) => ...)';

/**
 * The Knex adapter, on PostgreSQL (client `pg`) or on MySQL 8 and MariaDB (client `mysql2`).
 * Publish with the `trx` of `knex.transaction(async (trx) => …)`. On Postgres, outboxer's `$n`
 * placeholders are rewritten as Knex's `?` (values repeated and reordered to match), and every
 * other `?` is escaped as `\?`; the MySQL dialect's statements already bind `?` and hold no other.
 *
 * The relay side runs on the Knex instance's pool. Knex has no LISTEN: with `notify: true` on
 * Postgres, pass `notifications: nodePostgres(pool)` or relays find new messages by polling. On
 * MySQL relays poll, and the relay's transactions run at READ COMMITTED (Knex's `isolationLevel`).
 * Each statement of a publish on MySQL reads the server status of mysql2's reply: a `trx` whose
 * transaction the server ended (rolled back after a deadlock) is refused with `NOT_IN_TRANSACTION`.
 *
 * @example
 * import createKnex from 'knex';
 * import { knex } from 'outboxer/knex';
 * const db = createKnex({ client: 'pg', connection: process.env.DATABASE_URL });
 * const outboxer = new Outboxer({ database: knex(db), outboxes: { orders: { relay } } });
 * await db.transaction(async (trx) => {
 *   await trx('orders').insert(order);
 *   await outboxer.publish(trx, 'orders', order, { groupKey: `order:${order.id}` });
 * });
 */
export function knex(db: KnexLike, options?: DataLayerOptions): DatabaseAdapter<KnexTransaction, false> {
  if (typeof db !== 'function' && (typeof db !== 'object' || db === null))
    throw invalidOption('knex', 'a Knex instance', db);
  if (typeof db.raw !== 'function' || typeof db.transaction !== 'function')
    throw invalidOption('knex', 'a Knex instance', db);
  const dialect = knexDialect(db);
  return {
    dialect,
    sync: false,
    executeInTransaction(tx, query) {
      if (
        (typeof tx !== 'function' && (typeof tx !== 'object' || tx === null)) ||
        typeof tx.raw !== 'function'
      ) {
        throw new OutboxerError(
          'NOT_IN_TRANSACTION',
          'publish() needs the Knex transaction: await knex.transaction(async (trx) => { await outboxer.publish(trx, ...) }).',
        );
      }
      if (tx.isTransaction !== true || typeof tx.isCompleted !== 'function') {
        throw new OutboxerError(
          'NOT_IN_TRANSACTION',
          'publish() was given a Knex instance, not a transaction. Publish with the trx of knex.transaction(async (trx) => ...), so the message commits with your change.',
        );
      }
      if (tx.isCompleted()) {
        throw new OutboxerError(
          'NOT_IN_TRANSACTION',
          'publish() was given a Knex transaction that was already committed or rolled back.',
        );
      }
      if (dialect === mysqlDialect)
        return runMysql(tx, query).then((result) => mysqlRowsInTransaction(result, USAGE));
      return explainingFailedTransaction(runPostgres(tx, query));
    },
    ...resolveRelaySide('knex', dialect, knexRelaySide(db, dialect), options),
  };
}

/** The database of a Knex instance, from its client; a client outboxer does not support is refused. */
function knexDialect(db: KnexLike): Dialect {
  const { dialect, driverName } = db.client ?? {};
  if (dialect === undefined || dialect === 'postgresql') return postgresDialect;
  if (dialect === 'mysql' && driverName === 'mysql2') return mysqlDialect;
  const uses = dialect === 'mysql' ? `client "${driverName}" (use client "mysql2")` : dialect;
  throw new OutboxerError(
    'DATABASE_UNSUPPORTED',
    `knex(db): outboxer supports Knex on PostgreSQL (client "pg") and on MySQL or MariaDB (client "mysql2"); this instance uses ${uses}.`,
  );
}

/**
 * The relay side on a Knex instance's pool: statements on their own, or in one transaction (on
 * MySQL at READ COMMITTED, see ENGINE_ISOLATION_LEVEL).
 */
export function knexRelaySide(
  db: Pick<KnexLike, 'raw' | 'transaction'>,
  dialect: Dialect = postgresDialect,
): EngineSide {
  const mysql = dialect === mysqlDialect;
  const run = mysql
    ? async (on: KnexRaw, query: SqlQuery) => mysqlRows(await runMysql(on, query))
    : runPostgres;
  return {
    execute: (query) => run(db, query),
    executeAtomically: async (queries) =>
      db.transaction(
        async (trx) => {
          const results: Row[][] = [];
          for (const query of queries) results.push(await run(trx, query));
          return results;
        },
        mysql ? { isolationLevel: ENGINE_ISOLATION_LEVEL } : undefined,
      ),
  };
}

/**
 * A MySQL statement through `knex.raw`, which resolves with what mysql2 does: `[rows, fields]` for
 * a statement that returns rows, `[resultHeader, undefined]` for any other. The text goes as it
 * is: its only question marks are its placeholders (test/adapters/mysql-statements.test.ts).
 */
async function runMysql(db: KnexRaw, query: SqlQuery): Promise<unknown> {
  const response = (await db.raw(query.text, [...query.values])) as [unknown, unknown];
  return response[0];
}

async function runPostgres(db: KnexRaw, query: SqlQuery): Promise<Row[]> {
  const { text, values } = toQuestionMarks(query, { escapeLiterals: true });
  const result = (await db.raw(text, withArrayLiterals(values))) as {
    rows?: Row[];
    fields?: ReadonlyArray<{ name: string; dataTypeID: number }>;
  };
  const columns = result.fields?.map((field) => ({ name: field.name, type: field.dataTypeID }));
  return timestampsAsDates(result.rows ?? [], columns);
}
