import type { DatabaseAdapter, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { invalidOption } from '../../core/options.js';
import { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';
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

/** The part of a `Knex` instance (on the `pg` client) outboxer uses. */
export interface KnexLike extends KnexRaw {
  transaction<T>(fn: (trx: KnexTransaction) => Promise<T>): PromiseLike<T>;
  readonly client: { readonly dialect?: string };
}

/**
 * The Knex adapter (Postgres, on the `pg` client). Publish with the `trx` of
 * `knex.transaction(async (trx) => …)`. outboxer's `$n` placeholders are rewritten as Knex's `?`
 * (values repeated and reordered to match), and every other `?` is escaped as `\?`.
 *
 * The relay side runs on the Knex instance's pool. Knex has no LISTEN: with `notify: true`, pass
 * `notifications: nodePostgres(pool)` or relays find new messages by polling.
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
  const dialect = db.client?.dialect;
  if (dialect !== undefined && dialect !== 'postgresql') {
    throw new OutboxerError(
      'DATABASE_UNSUPPORTED',
      `knex(db): outboxer supports Knex on PostgreSQL (client "pg"); this instance uses ${dialect}.`,
    );
  }
  return {
    dialect: postgresDialect,
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
      return explainingFailedTransaction(run(tx, query));
    },
    ...resolveRelaySide('knex', postgresDialect, knexRelaySide(db), options),
  };
}

/** The relay side on a Knex instance's pool: statements on their own, or in one transaction. */
export function knexRelaySide(db: Pick<KnexLike, 'raw' | 'transaction'>): EngineSide {
  return {
    execute: (query) => run(db, query),
    executeAtomically: async (queries) =>
      db.transaction(async (trx) => {
        const results: Row[][] = [];
        for (const query of queries) results.push(await run(trx, query));
        return results;
      }),
  };
}

async function run(db: KnexRaw, query: SqlQuery): Promise<Row[]> {
  const { text, values } = toQuestionMarks(query, { escapeLiterals: true });
  const result = (await db.raw(text, withArrayLiterals(values))) as {
    rows?: Row[];
    fields?: ReadonlyArray<{ name: string; dataTypeID: number }>;
  };
  const columns = result.fields?.map((field) => ({ name: field.name, type: field.dataTypeID }));
  return timestampsAsDates(result.rows ?? [], columns);
}
