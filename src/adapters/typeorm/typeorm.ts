import type { DatabaseAdapter, Dialect, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { invalidOption } from '../../core/options.js';
import { mysqlDialect } from '../../dialects/mysql/mysql-dialect.js';
import { withArrayLiterals } from '../shared/postgres-values.js';
import { resolveRelaySide, type DataLayerOptions, type EngineSide } from '../shared/engine-side.js';
import { explainingFailedTransaction } from '../shared/failed-transaction.js';
import { mysqlRows, mysqlRowsInTransaction } from '../shared/mysql-results.js';
import { chooseOrmDialect, type OrmDialectName } from '../shared/choose-dialect.js';

/** The part of a TypeORM `QueryRunner` outboxer uses. */
export interface TypeOrmQueryRunner {
  readonly isTransactionActive: boolean;
  readonly isReleased: boolean;
  /**
   * With `useStructuredResult: true`, the rows are in `records` for every kind of statement, and
   * `raw` is the driver's own result (on MySQL, the result header of a statement without rows).
   */
  query(
    query: string,
    parameters: unknown[] | undefined,
    useStructuredResult: true,
  ): Promise<{ records?: unknown[]; raw?: unknown }>;
}

/**
 * The `EntityManager` of a transaction: the `manager` of `dataSource.transaction(async (manager) => …)`
 * (or `queryRunner.manager` after `queryRunner.startTransaction()`). A `DataSource` is not one:
 * it has `createQueryRunner`, so passing it is a type error. `dataSource.manager` has the same
 * type as a transaction's manager, so it is refused at run time, as is a query runner whose
 * transaction is not active.
 */
export interface TypeOrmEntityManager {
  readonly queryRunner?: TypeOrmQueryRunner;
  readonly createQueryRunner?: never;
}

/** A transaction's `EntityManager`, or the `QueryRunner` that started the transaction. */
export type TypeOrmTransaction = TypeOrmEntityManager | TypeOrmQueryRunner;

/** The part of a TypeORM `DataSource` (Postgres, or MySQL/MariaDB over mysql2) outboxer uses. */
export interface TypeOrmDataSource {
  createQueryRunner(): TypeOrmQueryRunner & {
    connect(): Promise<unknown>;
    startTransaction(isolationLevel?: 'READ COMMITTED'): Promise<void>;
    commitTransaction(): Promise<void>;
    rollbackTransaction(): Promise<void>;
    release(): Promise<void>;
  };
  readonly options: { readonly type: string };
}

/** Options of {@link typeorm}. */
export interface TypeOrmOptions extends DataLayerOptions {
  /**
   * The database behind the DataSource: `'postgres'`, or `'mysql'` for MySQL 8 and MariaDB 10.6+.
   * Default: read from the DataSource's `options.type` (`'postgres'`; `'mysql'` or `'mariadb'`).
   * When both are known they must agree.
   */
  dialect?: 'postgres' | 'mysql';
}

/** The DataSource types outboxer runs on, and the dialect of each. */
const DIALECT_OF_TYPE = new Map<string, OrmDialectName>([
  ['postgres', 'postgres'],
  ['mysql', 'mysql'],
  ['mariadb', 'mysql'],
]);

/**
 * The TypeORM adapter, for PostgreSQL (`type: 'postgres'`) and for MySQL 8 and MariaDB 10.6+
 * (`type: 'mysql'` or `'mariadb'`, the mysql2 driver). Publish with the `EntityManager` of
 * `dataSource.transaction(async (manager) => …)`, or with the `QueryRunner` of a transaction you
 * started yourself; statements run through its query runner (`$n` placeholders on Postgres, `?`
 * on MySQL).
 *
 * The relay side runs on query runners of the `DataSource`; on MySQL its transactions run at READ
 * COMMITTED, whatever the DataSource's `isolationLevel`. TypeORM has no LISTEN: on Postgres, with
 * `notify: true`, pass `notifications: nodePostgres(pool)` or relays find new messages by polling
 * (MySQL has no notifications: relays poll, and a relaying instance wakes its own workers).
 *
 * @example
 * import { DataSource } from 'typeorm';
 * import { typeorm } from 'outboxer/typeorm';
 * const dataSource = await new DataSource({ type: 'postgres', url, entities: [Order] }).initialize();
 * const outboxer = new Outboxer({ database: typeorm(dataSource), outboxes: { orders: { relay } } });
 * await dataSource.transaction(async (manager) => {
 *   await manager.save(Order, order);
 *   await outboxer.publish(manager, 'orders', order, { groupKey: `order:${order.id}` });
 * });
 */
export function typeorm(
  dataSource: TypeOrmDataSource,
  options?: TypeOrmOptions,
): DatabaseAdapter<TypeOrmTransaction, false> {
  if (
    typeof dataSource !== 'object' ||
    dataSource === null ||
    typeof dataSource.createQueryRunner !== 'function'
  ) {
    throw invalidOption('typeorm', 'an initialized TypeORM DataSource', dataSource);
  }
  const dialect = chooseDialect(dataSource.options?.type, options?.dialect);
  const mysql = dialect === mysqlDialect;
  const run = mysql ? runOnMysql : runOnPostgres;
  const own: EngineSide = {
    async execute(query) {
      const runner = dataSource.createQueryRunner();
      try {
        return await run(runner, query);
      } finally {
        await runner.release();
      }
    },
    async executeAtomically(queries) {
      const runner = dataSource.createQueryRunner();
      try {
        await runner.connect();
        // MySQL: READ COMMITTED (ENGINE_ISOLATION_LEVEL in adapters/shared/mysql-results.ts) locks
        // the rows a statement changes without the gaps beside them; Postgres' default already.
        await (mysql ? runner.startTransaction('READ COMMITTED') : runner.startTransaction());
        try {
          const results: Row[][] = [];
          for (const query of queries) results.push(await run(runner, query));
          await runner.commitTransaction();
          return results;
        } catch (error) {
          if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
          throw error;
        }
      } finally {
        await runner.release();
      }
    },
  };
  return {
    dialect,
    sync: false,
    executeInTransaction(tx, query) {
      const runner = transactionRunner(tx);
      return mysql ? publishOnMysql(runner, query) : explainingFailedTransaction(run(runner, query));
    },
    ...resolveRelaySide('typeorm', dialect, own, options, ['dialect']),
  };
}

function chooseDialect(type: string | undefined, name: unknown): Dialect {
  const detected = type === undefined ? undefined : DIALECT_OF_TYPE.get(type);
  if (detected === undefined && type !== undefined) {
    throw new OutboxerError(
      'DATABASE_UNSUPPORTED',
      `typeorm(dataSource): outboxer supports TypeORM on PostgreSQL (type "postgres") and on MySQL or MariaDB (type "mysql" or "mariadb"); this DataSource is "${type}".`,
    );
  }
  return chooseOrmDialect('typeorm.dialect', name, detected, `the DataSource is of type "${type}"`);
}

function transactionRunner(tx: TypeOrmTransaction): TypeOrmQueryRunner {
  if (typeof tx !== 'object' || tx === null) {
    throw new OutboxerError(
      'NOT_IN_TRANSACTION',
      'publish() needs the EntityManager of your transaction: await dataSource.transaction(async (manager) => { await outboxer.publish(manager, ...) }).',
    );
  }
  if ('createQueryRunner' in tx && !('isTransactionActive' in tx)) {
    throw new OutboxerError(
      'NOT_IN_TRANSACTION',
      'publish() was given a DataSource, not a transaction. Publish with the manager of dataSource.transaction(async (manager) => ...), so the message commits with your change.',
    );
  }
  const runner = 'isTransactionActive' in tx ? tx : tx.queryRunner;
  if (runner === undefined || typeof runner.query !== 'function') {
    throw new OutboxerError(
      'NOT_IN_TRANSACTION',
      'publish() was given an EntityManager outside a transaction (such as dataSource.manager). Publish with the manager of dataSource.transaction(async (manager) => ...).',
    );
  }
  if (runner.isReleased || !runner.isTransactionActive) {
    throw new OutboxerError(
      'NOT_IN_TRANSACTION',
      'publish() was given a TypeORM EntityManager or QueryRunner whose transaction is not active. Publish inside dataSource.transaction(async (manager) => ...), or after queryRunner.startTransaction().',
    );
  }
  return runner;
}

async function runOnPostgres(runner: TypeOrmQueryRunner, query: SqlQuery): Promise<Row[]> {
  // Structured: a plain query() returns [rows, count] for UPDATE and DELETE on Postgres.
  const result = await runner.query(query.text, withArrayLiterals(query.values), true);
  return (result.records ?? []) as Row[];
}

/**
 * On MySQL the rows of a SELECT are `raw` itself (and `records` a copy); any other statement's
 * `raw` is mysql2's result header, and `records` empty.
 */
async function runOnMysql(runner: TypeOrmQueryRunner, query: SqlQuery): Promise<Row[]> {
  return mysqlRows((await runner.query(query.text, [...query.values], true)).raw);
}

/**
 * A statement in the caller's transaction on MySQL, refused when its result header shows the
 * connection outside a transaction (see mysqlRowsInTransaction). TypeORM still counts a
 * transaction active after InnoDB rolled it back on a deadlock (or after a `ROLLBACK` sent through
 * `query()`), and the statements after it would autocommit.
 */
async function publishOnMysql(runner: TypeOrmQueryRunner, query: SqlQuery): Promise<Row[]> {
  const result = await runner.query(query.text, [...query.values], true);
  return mysqlRowsInTransaction(
    result.raw,
    'Publish with the manager of dataSource.transaction(async (manager) => ...) (TypeORM still counts a transaction active after the server ended it)',
  );
}
