import type { DatabaseAdapter, Dialect, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { invalidOption } from '../../core/options.js';
import { mysqlDialect } from '../../dialects/mysql/mysql-dialect.js';
import { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';
import { escapeMysqlQuestionMarks } from '../shared/mysql-placeholders.js';
import { checkTransactionWithSavepoint } from '../shared/mysql-results.js';
import { toQuestionMarks } from '../shared/placeholders.js';
import { postgresText } from '../shared/postgres-values.js';
import { resolveRelaySide, type DataLayerOptions } from '../shared/engine-side.js';
import { explainingFailedTransaction } from '../shared/failed-transaction.js';
import { nativeRelaySide, type MikroOrmNativeConnection } from './mikro-orm-relay-side.js';

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

/** The part of a `MikroORM` instance (`MikroORM.init()` of a SQL driver) outboxer uses. */
export interface MikroOrmLike {
  readonly em: {
    getConnection(): MikroOrmNativeConnection;
    getPlatform(): object;
  };
}

/** Options of {@link mikroOrm}. */
export interface MikroOrmOptions extends DataLayerOptions {
  /**
   * The database behind the ORM. Default: from the ORM's platform: `'postgres'` for
   * `@mikro-orm/postgresql`, `'mysql'` for `@mikro-orm/mysql` and `@mikro-orm/mariadb` (MySQL 8,
   * MariaDB 10.6+). Set it for a platform of your own whose class does not extend theirs.
   */
  dialect?: 'postgres' | 'mysql';
}

/**
 * The MikroORM adapter (MikroORM 7), for PostgreSQL (`@mikro-orm/postgresql`) and MySQL or
 * MariaDB (`@mikro-orm/mysql`, `@mikro-orm/mariadb`). Publish with the `em` of
 * `em.transactional(async (em) => …)` (or of `em.begin()`); statements run through
 * `em.getConnection().execute(sql, params, 'all', em.getTransactionContext())`. MikroORM binds `?`:
 * outboxer's placeholders become `?` and every other question mark `\?`. MikroORM writes the values
 * into the SQL text itself, quoted by its platform; on Postgres arrays go as array literals.
 *
 * The relay side runs on the pool of the ORM's driver (`getNativeClient()`: pg's or mysql2's),
 * through the `outboxer/pg` and `outboxer/mysql2` adapters, with real parameters. On Postgres it
 * LISTENs (for `notify: true`) on a dedicated connection opened with that pool's options.
 *
 * @example
 * import { MikroORM } from '@mikro-orm/postgresql'; // or '@mikro-orm/mysql', '@mikro-orm/mariadb'
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
  options?: MikroOrmOptions,
): DatabaseAdapter<MikroOrmEntityManager, false> {
  if (typeof orm !== 'object' || orm === null || typeof orm.em?.getConnection !== 'function') {
    throw invalidOption('mikroOrm', 'a MikroORM instance (from MikroORM.init())', orm);
  }
  const connection = orm.em.getConnection();
  if (typeof connection?.getNativeClient !== 'function') {
    throw invalidOption(
      'mikroOrm',
      'a MikroORM 7 instance of a SQL driver (its connection has no getNativeClient(); MikroORM 6 is not supported)',
      orm,
    );
  }
  const dialect = chooseDialect(orm, options?.dialect);
  return {
    dialect,
    sync: false,
    async executeInTransaction(tx, query) {
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
      const connection = tx.getConnection();
      if (dialect === postgresDialect) {
        return explainingFailedTransaction(run(connection, forMikroOrm(query, dialect), context as never));
      }
      // Kysely, under MikroORM, turns the result header mysql2 reads into counts: a savepoint tells
      // instead whether the transaction is still open on the server (a deadlock ends it).
      if (query.checksTransaction === true) {
        await checkTransactionWithSavepoint(
          (statement) => run(connection, statement, context as never),
          USAGE,
        );
      }
      return run(connection, forMikroOrm(query, dialect), context as never);
    },
    ...resolveRelaySide('mikroOrm', dialect, nativeRelaySide(connection, dialect), options, ['dialect']),
  };
}

/**
 * The dialect of the ORM's platform, found by the names of its classes: a subclass of
 * `PostgreSqlPlatform` is Postgres, of `MySqlPlatform` (`MariaDbPlatform` extends it) MySQL.
 */
function chooseDialect(orm: MikroOrmLike, name: MikroOrmOptions['dialect']): Dialect {
  if (name === 'postgres') return postgresDialect;
  if (name === 'mysql') return mysqlDialect;
  if (name !== undefined) throw invalidOption('mikroOrm.dialect', '"postgres" or "mysql"', name);
  const classes: string[] = [];
  const platform = typeof orm.em.getPlatform === 'function' ? orm.em.getPlatform() : undefined;
  for (let p = platform && Object.getPrototypeOf(platform); p && p !== Object.prototype;) {
    classes.push((p as { constructor: { name: string } }).constructor.name);
    p = Object.getPrototypeOf(p);
  }
  if (classes.some((c) => /PostgreSqlPlatform$/.test(c))) return postgresDialect;
  if (classes.some((c) => /MySqlPlatform$/.test(c))) return mysqlDialect;
  throw new OutboxerError(
    'DATABASE_UNSUPPORTED',
    `mikroOrm(orm): outboxer supports MikroORM on PostgreSQL (@mikro-orm/postgresql) and MySQL or MariaDB (@mikro-orm/mysql, @mikro-orm/mariadb); this ORM uses ${classes[0] ?? 'an unknown platform'}. For a platform of your own on one of those databases, pass mikroOrm(orm, { dialect: 'postgres' }) or { dialect: 'mysql' }.`,
  );
}

/**
 * The statement as MikroORM's `execute()` takes it: `?` placeholders, every other question mark
 * `\?`. A statement without values is sent as it is: MikroORM then leaves the text alone, its
 * `\?` included.
 */
function forMikroOrm(query: SqlQuery, dialect: Dialect): SqlQuery {
  if (dialect === mysqlDialect) {
    return query.values.length === 0
      ? query
      : { text: escapeMysqlQuestionMarks(query.text), values: query.values };
  }
  const rewritten = toQuestionMarks(query, { escapeLiterals: true });
  if (rewritten.values.length === 0) return query;
  // MikroORM quotes each value into the text: arrays and dates go as their Postgres text.
  const values = rewritten.values.map((value) =>
    Array.isArray(value) || value instanceof Date ? postgresText(value) : value,
  );
  return { text: rewritten.text, values };
}

/** How a MikroORM transaction is opened, for the message of a refusal. */
const USAGE = 'Publish with the em of em.transactional(async (em) => ...)';

async function run(connection: MikroOrmConnection, query: SqlQuery, context: never): Promise<Row[]> {
  const rows = await connection.execute(query.text, [...query.values], 'all', context);
  return (Array.isArray(rows) ? rows : []) as Row[];
}
