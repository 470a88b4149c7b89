import type { DatabaseAdapter, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { invalidOption } from '../../core/options.js';
import { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';
import { toQuestionMarks } from '../shared/placeholders.js';
import { postgresText } from '../shared/postgres-values.js';
import { knexRelaySide, type KnexLike } from '../knex/knex.js';
import { resolveRelaySide, type DataLayerOptions } from '../shared/engine-side.js';
import { explainingFailedTransaction } from '../shared/failed-transaction.js';

/** The part of a MikroORM `Connection` outboxer uses. */
export interface MikroOrmConnection {
  /** `?` placeholders, `\?` for a literal question mark; `ctx` is the transaction to run in. */
  execute(query: string, params: unknown[], method: 'all', ctx?: never): Promise<unknown>;
}

/**
 * A MikroORM `EntityManager`: publish with the `em` of `em.transactional(async (em) => …)`. The
 * root `orm.em` has the same type, so outside a transaction it is refused at run time; the
 * `MikroORM` instance itself is a type error.
 */
export interface MikroOrmEntityManager {
  getConnection(): MikroOrmConnection;
  isInTransaction(): boolean;
  getTransactionContext(): unknown;
}

/** The part of a `MikroORM` instance (from `@mikro-orm/postgresql`) outboxer uses. */
export interface MikroOrmLike {
  readonly em: {
    getConnection(): { getKnex(): Pick<KnexLike, 'raw' | 'transaction'> };
    getPlatform(): object;
  };
}

/**
 * The MikroORM adapter (v6, `@mikro-orm/postgresql`). Publish with the `em` of
 * `em.transactional(async (em) => …)` (or of `em.begin()`); statements run through
 * `em.getConnection().execute(sql, params, 'all', em.getTransactionContext())`. outboxer's `$n`
 * placeholders are rewritten as MikroORM's `?` and other question marks escaped as `\?`. MikroORM
 * writes the values into the SQL text itself, quoted by its Postgres platform; arrays go as
 * Postgres array literals.
 *
 * The relay side runs on the ORM's Knex instance (`orm.em.getConnection().getKnex()`), as the
 * `outboxer/knex` adapter does: its rows carry column types, so timestamps, which MikroORM's
 * connections return as text, become dates again. MikroORM has no LISTEN:
 * with `notify: true`, pass `notifications: nodePostgres(pool)` or relays find new messages by
 * polling.
 *
 * @example
 * import { MikroORM } from '@mikro-orm/postgresql';
 * import { mikroOrm } from 'outboxer/mikro-orm';
 * const orm = await MikroORM.init({ clientUrl, entities: [Order] });
 * const outboxer = new Outboxer({ database: mikroOrm(orm), outboxes: { orders: { relay } } });
 * await orm.em.fork().transactional(async (em) => {
 *   em.persist(order);
 *   await outboxer.publish(em, 'orders', order, { groupKey: `order:${order.id}` });
 * });
 */
export function mikroOrm(
  orm: MikroOrmLike,
  options?: DataLayerOptions,
): DatabaseAdapter<MikroOrmEntityManager, false> {
  if (typeof orm !== 'object' || orm === null || typeof orm.em?.getConnection !== 'function') {
    throw invalidOption('mikroOrm', 'a MikroORM instance (from MikroORM.init())', orm);
  }
  const platform = orm.em.getPlatform?.()?.constructor.name ?? '';
  if (/sqlite|mysql|maria|mssql|mongo/i.test(platform)) {
    throw new OutboxerError(
      'DATABASE_UNSUPPORTED',
      `mikroOrm(orm): outboxer supports MikroORM on PostgreSQL (@mikro-orm/postgresql); this ORM uses ${platform}.`,
    );
  }
  // The relay side runs on the ORM's Knex: its connections return timestamps as text, which only
  // the column types of a raw result can turn back into dates.
  const own = knexRelaySide(orm.em.getConnection().getKnex());
  return {
    dialect: postgresDialect,
    sync: false,
    executeInTransaction(tx, query) {
      if (
        typeof tx !== 'object' ||
        tx === null ||
        typeof tx.getConnection !== 'function' ||
        typeof tx.isInTransaction !== 'function'
      ) {
        throw new OutboxerError(
          'NOT_IN_TRANSACTION',
          'publish() needs the EntityManager of your transaction: await em.transactional(async (em) => { await outboxer.publish(em, ...) }).',
        );
      }
      const context = tx.isInTransaction() ? tx.getTransactionContext() : undefined;
      if (context === undefined || context === null) {
        throw new OutboxerError(
          'NOT_IN_TRANSACTION',
          'publish() was given a MikroORM EntityManager outside a transaction. Publish with the em of em.transactional(async (em) => ...), so the message commits with your change.',
        );
      }
      return explainingFailedTransaction(run(tx.getConnection(), query, context as never));
    },
    ...resolveRelaySide('mikroOrm', postgresDialect, own, options),
  };
}

async function run(connection: MikroOrmConnection, query: SqlQuery, context: never): Promise<Row[]> {
  const { text, values } = toQuestionMarks(query, { escapeLiterals: true });
  // MikroORM quotes each value into the text: arrays and dates go as their Postgres text.
  const params = values.map((value) =>
    Array.isArray(value) || value instanceof Date ? postgresText(value) : value,
  );
  const rows = await connection.execute(text, params, 'all', context);
  return (Array.isArray(rows) ? rows : []) as Row[];
}
