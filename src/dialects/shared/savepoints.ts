import type { SqlQuery } from '../../core/sql.js';

/**
 * The inbox's savepoint commands, the same SQL on Postgres, SQLite and MySQL. `name` is made by the
 * inbox (`outboxer_inbox_<n>`), never by a caller. They return no rows (`rowless`), the savepoint
 * is where a handle's work begins (`checksTransaction`), and the rollback is the one statement
 * Postgres accepts in a transaction an error aborted (`recovers`).
 */
export const savepointStatements = Object.freeze({
  savepoint: (name: string): SqlQuery => ({
    text: `SAVEPOINT ${name}`,
    values: [],
    rowless: true,
    checksTransaction: true,
  }),
  releaseSavepoint: (name: string): SqlQuery => ({
    text: `RELEASE SAVEPOINT ${name}`,
    values: [],
    rowless: true,
  }),
  rollbackToSavepoint: (name: string): SqlQuery => ({
    text: `ROLLBACK TO SAVEPOINT ${name}`,
    values: [],
    rowless: true,
    recovers: true,
  }),
});
