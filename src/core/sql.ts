/**
 * What SQL is to the engine: text with its parameters, and a statement that carries the reader of
 * its own rows, so that the column aliases a dialect writes are read by that dialect alone.
 */

/** SQL text and its parameters. Values always travel as parameters, never in the text. */
export interface SqlQuery {
  readonly text: string;
  readonly values: readonly unknown[];
  /**
   * One of the few fixed texts run again and again (the publish INSERT; the relay's poll,
   * acknowledge, settle, lease renewal): an adapter that can may send it as a prepared statement,
   * parsed and planned once per connection.
   */
  readonly prepare?: boolean;
  /**
   * A statement Postgres accepts in a transaction an error has aborted (`ROLLBACK TO SAVEPOINT`):
   * an adapter that refuses to run anything in such a transaction lets this one through.
   */
  readonly recovers?: boolean;
  /**
   * A command that returns no rows (`SAVEPOINT`…): an adapter whose query call refuses such a
   * statement (Drizzle's `all()` on better-sqlite3) runs it another way.
   */
  readonly rowless?: boolean;
  /**
   * This statement begins work in the caller's transaction (a publish's first statement on MySQL,
   * the inbox's savepoint), before anything is written: an adapter checks here that the
   * transaction is still open. MySQL runs a statement outside a transaction in autocommit, and
   * InnoDB rolls a whole transaction back on a deadlock, after which the library's transaction
   * object runs each statement on its own. An adapter whose library passes on the reply's result
   * header (mysql2, Knex, Drizzle, TypeORM) reads the server status of every reply and needs no
   * flag; one that keeps it to itself (Kysely, Prisma) runs a savepoint probe before this statement.
   */
  readonly checksTransaction?: boolean;
}

export type Row = Record<string, unknown>;

/** A statement and the reader of its rows: `statement.read(await adapter.execute(statement))`. */
export interface Statement<R> extends SqlQuery {
  read(rows: readonly Row[]): R;
}

/**
 * Statements run in one transaction, in order, and the reader of all their rows (one array per
 * statement, as `executeAtomically` returns them). An array, so that it runs as it is.
 */
export type Batch<R> = readonly SqlQuery[] & {
  read(results: readonly (readonly Row[])[]): R;
};

/**
 * One statement, or several run in one transaction where a database needs more than one for the
 * same work (MySQL has no `RETURNING` on UPDATE and no data-modifying CTEs, so it changes rows and
 * reads what it changed in statements of their own). Run it with `run` (database.ts).
 */
export type Statements<R> = Statement<R> | Batch<R>;

/** True when `work` is a {@link Batch}: several statements run in one transaction. */
export function isBatch<R>(work: Statements<R>): work is Batch<R> {
  return Array.isArray(work);
}

/** The queries of a statement or a batch, in order. */
export function queriesOf(work: Statements<unknown>): readonly SqlQuery[] {
  return isBatch(work) ? work : [work];
}

/** Reads the rows of `work`'s queries, `results` holding one array per query in order. */
export function readResults<R>(work: Statements<R>, results: readonly (readonly Row[])[]): R {
  return isBatch(work) ? work.read(results) : work.read(results[0] ?? []);
}

/** Pairs a query with its reader. */
export function statement<R>(query: SqlQuery, read: (rows: readonly Row[]) => R): Statement<R> {
  return { ...query, read };
}

/** A statement whose rows nobody reads. */
export function unread(query: SqlQuery): Statement<void> {
  return { ...query, read: () => undefined };
}

/** Pairs statements run together with the reader of their rows. */
export function batch<R>(
  queries: readonly SqlQuery[],
  read: (results: readonly (readonly Row[])[]) => R,
): Batch<R> {
  return Object.assign([...queries], { read });
}

/** The `status` column's values, in SQL text and in code alike. */
export const Status = { ready: 0, retry: 1, held: 2, dead: 3, delivered: 4 } as const;
export type StatusValue = (typeof Status)[keyof typeof Status];
