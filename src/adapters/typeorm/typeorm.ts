import type { DatabaseAdapter, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { invalidOption } from '../../core/options.js';
import { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';
import { withArrayLiterals } from '../shared/postgres-values.js';
import { resolveRelaySide, type DataLayerOptions, type EngineSide } from '../shared/engine-side.js';
import { explainingFailedTransaction } from '../shared/failed-transaction.js';

/** The part of a TypeORM `QueryRunner` outboxer uses. */
export interface TypeOrmQueryRunner {
  readonly isTransactionActive: boolean;
  readonly isReleased: boolean;
  /** With `useStructuredResult: true`, the rows are in `records` for every kind of statement. */
  query(
    query: string,
    parameters: unknown[] | undefined,
    useStructuredResult: true,
  ): Promise<{ records?: unknown[] }>;
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

/** The part of a TypeORM `DataSource` (Postgres driver) outboxer uses. */
export interface TypeOrmDataSource {
  createQueryRunner(): TypeOrmQueryRunner & {
    connect(): Promise<unknown>;
    startTransaction(): Promise<void>;
    commitTransaction(): Promise<void>;
    rollbackTransaction(): Promise<void>;
    release(): Promise<void>;
  };
  readonly options: { readonly type: string };
}

/**
 * The TypeORM adapter (Postgres driver). Publish with the `EntityManager` of
 * `dataSource.transaction(async (manager) => …)`, or with the `QueryRunner` of a transaction you
 * started yourself; statements run through its query runner with `$n` placeholders.
 *
 * The relay side runs on query runners of the `DataSource`. TypeORM has no LISTEN: with
 * `notify: true`, pass `notifications: nodePostgres(pool)` or relays find new messages by polling.
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
  options?: DataLayerOptions,
): DatabaseAdapter<TypeOrmTransaction, false> {
  if (
    typeof dataSource !== 'object' ||
    dataSource === null ||
    typeof dataSource.createQueryRunner !== 'function'
  ) {
    throw invalidOption('typeorm', 'an initialized TypeORM DataSource', dataSource);
  }
  const type = dataSource.options?.type;
  if (type !== undefined && type !== 'postgres') {
    throw new OutboxerError(
      'DATABASE_UNSUPPORTED',
      `typeorm(dataSource): outboxer supports TypeORM on PostgreSQL (type "postgres"); this DataSource is "${type}".`,
    );
  }
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
        await runner.startTransaction();
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
    dialect: postgresDialect,
    sync: false,
    executeInTransaction(tx, query) {
      return explainingFailedTransaction(run(transactionRunner(tx), query));
    },
    ...resolveRelaySide('typeorm', postgresDialect, own, options),
  };
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

async function run(runner: TypeOrmQueryRunner, query: SqlQuery): Promise<Row[]> {
  // Structured: a plain query() returns [rows, count] for UPDATE and DELETE on Postgres.
  const result = await runner.query(query.text, withArrayLiterals(query.values), true);
  return (result.records ?? []) as Row[];
}
