/**
 * What the MySQL adapters share: reading what mysql2 resolves a query with (rows for a statement
 * that returns them, a result header for any other), telling from that header whether the user's
 * transaction is open, checking it another way where a library keeps the header to itself
 * (Kysely), and the isolation level of the engine's own transactions. Used by `outboxer/mysql2`
 * and by Knex, Kysely and Drizzle on mysql2.
 */
import type { Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';

/** `SERVER_STATUS_IN_TRANS` and `SERVER_STATUS_AUTOCOMMIT` of the protocol's OK packet. */
const IN_TRANSACTION = 0x0001;
const AUTOCOMMIT = 0x0002;

/** `ER_SP_DOES_NOT_EXIST`: "SAVEPOINT … does not exist". */
const NO_SUCH_SAVEPOINT = 1305;

/**
 * The isolation level of the engine's transactions (relays, the admin API), whatever the server's
 * default. InnoDB then locks the rows a statement changes or locks on purpose, without the gaps
 * between index entries that REPEATABLE READ's searches also lock, which would make a publisher
 * inserting into such a gap wait for a settle, or deadlock with it. The dialect's statements are
 * written to agree under READ COMMITTED (each change locks its rows before it tallies them: see
 * dialects/mysql/shared.ts). It is set for the next transaction only (`SET TRANSACTION`, or the
 * library's isolation option, which sends the same), so a connection keeps its own level.
 */
export const ENGINE_ISOLATION_LEVEL = 'read committed';

/** The rows of what mysql2 resolved a statement with: a SELECT's rows, none for a result header. */
export function mysqlRows(result: unknown): Row[] {
  return Array.isArray(result) ? (result as Row[]) : [];
}

/**
 * The rows of a statement run in the user's transaction; for a statement that returns none, its
 * result header, whose server status says whether a transaction is open. MySQL's publish starts
 * with a statement that writes nothing (`transactionCheck`), so a connection outside a transaction
 * is refused before anything is written (with autocommit off, every statement is inside one). This
 * also catches a transaction that ended under the library's feet: one InnoDB rolled back after a
 * deadlock, or one a DDL statement committed; the statements after it would otherwise autocommit.
 * `usage` says how the library opens a transaction, for the error's message.
 */
export function mysqlRowsInTransaction(result: unknown, usage: string): Row[] {
  if (Array.isArray(result)) return result as Row[];
  const status = (result as { serverStatus?: unknown } | null)?.serverStatus;
  if (typeof status === 'number' && (status & IN_TRANSACTION) === 0 && (status & AUTOCOMMIT) !== 0) {
    throw transactionEnded(usage);
  }
  return [];
}

/**
 * The same check for a library that hands back no result header (Kysely turns it into counts): a
 * savepoint, set and released. Outside a transaction, in autocommit, `SAVEPOINT` ends with its own
 * implicit transaction and the release finds nothing (1305); inside one, both succeed and leave no
 * trace. It runs in place of the statement marked `transactionCheck`, which writes nothing, at two
 * round trips instead of one, and only for that statement (once per publish). The same on MySQL 8
 * and MariaDB (`@@in_transaction` is MariaDB's alone).
 */
export async function checkTransactionWithSavepoint(
  run: (query: SqlQuery) => Promise<unknown>,
  usage: string,
): Promise<Row[]> {
  await run({ text: 'SAVEPOINT outboxer_transaction_check', values: [], rowless: true });
  try {
    await run({ text: 'RELEASE SAVEPOINT outboxer_transaction_check', values: [], rowless: true });
  } catch (error) {
    if (errorNumber(error) === NO_SUCH_SAVEPOINT) throw transactionEnded(usage, error);
    throw error;
  }
  return [];
}

function transactionEnded(usage: string, cause?: unknown): OutboxerError {
  return new OutboxerError(
    'NOT_IN_TRANSACTION',
    `publish() was given a connection that is not inside a transaction: it was never opened, or it has ended (the server rolled it back after a deadlock, or a DDL statement committed it). ${usage}, so the message commits with your change; after a deadlock, retry the transaction from the start.`,
    cause === undefined ? {} : { cause },
  );
}

/** mysql2's `errno`, on the error or on what a library wrapped (Drizzle's `cause`). */
function errorNumber(error: unknown, depth = 0): number | undefined {
  if (typeof error !== 'object' || error === null || depth > 4) return undefined;
  const { errno, cause } = error as { errno?: unknown; cause?: unknown };
  return typeof errno === 'number' ? errno : errorNumber(cause, depth + 1);
}
