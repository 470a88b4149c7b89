/**
 * What the MySQL adapters share: reading what mysql2 resolves a query with (rows for a statement
 * that returns them, a result header for any other), telling from that header whether the user's
 * transaction is open, checking it with a savepoint probe where a library keeps the header to
 * itself, and the isolation level of the engine's own transactions. Used by `outboxer/mysql2` and
 * by Knex, Drizzle and TypeORM on mysql2 (which pass the header on), Kysely (which does not) and
 * Prisma on `@prisma/adapter-mariadb` (which does not either).
 */
import type { Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { NO_SUCH_SAVEPOINT, transactionProbe } from '../../dialects/mysql/publish.js';

/** `SERVER_STATUS_IN_TRANS` and `SERVER_STATUS_AUTOCOMMIT` of the protocol's OK packet. */
const IN_TRANSACTION = 0x0001;
const AUTOCOMMIT = 0x0002;

/**
 * The isolation level of the engine's transactions (relays, the admin API), whatever the server's
 * default. InnoDB then locks the rows a statement changes or locks on purpose, without the gaps
 * between index entries that REPEATABLE READ's searches also lock, which would make a publisher
 * inserting into such a gap wait for a settle, or deadlock with it. The dialect's statements are
 * written to agree under READ COMMITTED (each change locks its rows before it tallies them: see
 * dialects/mysql/shared.ts). It is set for the next transaction only (`SET TRANSACTION`, or the
 * library's isolation option, which sends the same: TypeORM's `'READ COMMITTED'`, Prisma's
 * `ReadCommitted`), so a connection keeps its own level.
 */
export const ENGINE_ISOLATION_LEVEL = 'read committed';

/** The rows of what mysql2 resolved a statement with: a SELECT's rows, none for a result header. */
export function mysqlRows(result: unknown): Row[] {
  return Array.isArray(result) ? (result as Row[]) : [];
}

/**
 * The rows of a statement run in the user's transaction; for a statement that returns none, its
 * result header, whose server status says whether a transaction is open. Every reply is read (it
 * costs nothing), and the statements that begin work (`checksTransaction`: MySQL's publish starts
 * with a `SET` that writes nothing, the inbox with its savepoint) come first, so a connection
 * outside a transaction is refused before anything is written (with autocommit off, every
 * statement is inside one). This also catches a transaction that ended under the library's feet:
 * one InnoDB rolled back after a deadlock, or one a DDL statement committed; the statements after
 * it would otherwise autocommit. `usage` says how the library opens a transaction, for the message.
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
 * The same check for a library that hands back no result header (Kysely turns it into counts,
 * Prisma into a count or nothing): the dialect's {@link transactionProbe}, a savepoint set and
 * released, run by `run` before a statement marked `checksTransaction`. Outside a transaction, in
 * autocommit, `SAVEPOINT` ends with its own implicit transaction and the release finds nothing
 * (1305); inside one, both succeed and leave no trace. Two round trips, once per publish and once
 * per inbox handle. The same on MySQL 8 and MariaDB (`@@in_transaction` is MariaDB's alone).
 */
export async function checkTransactionWithSavepoint(
  run: (query: SqlQuery) => PromiseLike<unknown>,
  usage: string,
): Promise<void> {
  const [savepoint, release] = transactionProbe;
  await run(savepoint!);
  try {
    await run(release!);
  } catch (error) {
    if (isNoSuchSavepoint(error)) throw transactionEnded(usage, error);
    throw error;
  }
}

function transactionEnded(usage: string, cause?: unknown): OutboxerError {
  return new OutboxerError(
    'NOT_IN_TRANSACTION',
    `publish() (or the inbox's handle()) was given a connection that is not inside a transaction: it was never opened, or it has ended (the server rolled it back after a deadlock, or a DDL statement committed it). ${usage}, so the message commits with your change; after a deadlock, retry the transaction from the start.`,
    cause === undefined ? {} : { cause },
  );
}

/**
 * Whether `error` is MySQL's 1305, wherever the library keeps the number: mysql2's `errno` (on the
 * error, or on the `cause` Drizzle and Kysely wrap), or as text in a Prisma error (`meta.code` of
 * P2010, `originalCode` of its driver adapter error's `cause`).
 */
function isNoSuchSavepoint(error: unknown, depth = 0): boolean {
  if (typeof error !== 'object' || error === null || depth > 6) return false;
  const { errno, code, originalCode, cause, meta, driverAdapterError } = error as Record<string, unknown>;
  const text = String(NO_SUCH_SAVEPOINT);
  if (errno === NO_SUCH_SAVEPOINT || code === text || originalCode === text) return true;
  return [cause, meta, driverAdapterError].some((inner) => isNoSuchSavepoint(inner, depth + 1));
}
