import { OutboxerError } from '../../core/errors.js';

/** SQLSTATE `in_failed_sql_transaction`: "current transaction is aborted, commands ignored until end of transaction block". */
const IN_FAILED_SQL_TRANSACTION = '25P02';

/**
 * `NOT_IN_TRANSACTION` for a publish into a Postgres transaction that an earlier statement has
 * already failed; `cause` is the database's error, when there is one.
 */
export function failedTransaction(cause?: unknown): OutboxerError {
  return new OutboxerError(
    'NOT_IN_TRANSACTION',
    'publish() was given a transaction that already failed: an earlier statement in it raised an error, and Postgres ignores every statement until the transaction ends. The transaction must be rolled back, then retried from the start (to carry on after an expected error, run that statement under a SAVEPOINT and ROLLBACK TO it).',
    cause === undefined ? {} : { cause },
  );
}

/**
 * A publish's error that is Postgres' 25P02 as {@link failedTransaction}; any other error as it is.
 * The code is looked for where each library keeps it: on the error (pg, postgres.js, Knex, Kysely,
 * TypeORM, MikroORM), on what it wraps (`cause`: Drizzle), or in Prisma's `meta` (the engine's
 * `code`, a driver adapter's `driverAdapterError.cause.originalCode`).
 */
export function explainFailedTransaction(error: unknown): unknown {
  return hasCode(error, IN_FAILED_SQL_TRANSACTION, 0) ? failedTransaction(error) : error;
}

function hasCode(value: unknown, code: string, depth: number): boolean {
  if (typeof value !== 'object' || value === null || depth > 6) return false;
  const { code: own, originalCode, cause, meta, driverAdapterError } = value as Record<string, unknown>;
  if (own === code || originalCode === code) return true;
  return [cause, meta, driverAdapterError].some((inner) => hasCode(inner, code, depth + 1));
}

/** The rows of a publish's statement, with Postgres' 25P02 rejection as {@link failedTransaction}. */
export function explainingFailedTransaction<T>(rows: PromiseLike<T>): Promise<T> {
  return Promise.resolve(rows).catch((error: unknown) => {
    throw explainFailedTransaction(error);
  });
}
