/**
 * Whether an error is the database ending a transaction to break a deadlock or a serialization
 * conflict: the whole transaction was rolled back, and the same statements, run again, may well
 * succeed. Client libraries wrap the driver's error (Prisma, MikroORM, TypeORM), so the chain of
 * `cause`s (a driver error kept as `driverError`, Prisma's `meta.code`) is searched for the
 * database's code; Prisma's own P2034 says the same (a write conflict or a deadlock).
 */
const MAX_DEPTH = 5;

/** The `code`s and `errno`s found on an error and the errors it wraps. */
function* codesOf(error: unknown): Generator<unknown> {
  let current: unknown = error;
  for (let depth = 0; depth < MAX_DEPTH && typeof current === 'object' && current !== null; depth++) {
    const e = current as {
      code?: unknown;
      errno?: unknown;
      driverError?: unknown;
      meta?: unknown;
      cause?: unknown;
    };
    yield e.code;
    yield e.errno;
    for (const inner of [e.driverError, e.meta]) {
      if (typeof inner !== 'object' || inner === null) continue;
      yield (inner as { code?: unknown }).code;
      yield (inner as { errno?: unknown }).errno;
    }
    current = e.cause;
  }
}

/** A code among `codes` on the error or what it wraps. */
export function hasErrorCode(error: unknown, codes: ReadonlySet<unknown>): boolean {
  for (const code of codesOf(error)) if (codes.has(code)) return true;
  return false;
}

/** Postgres: deadlock_detected, serialization_failure. */
export const POSTGRES_CONFLICTS: ReadonlySet<unknown> = new Set(['40P01', '40001', 'P2034']);

/** MySQL and MariaDB: ER_LOCK_DEADLOCK (1213), by name (mysql2, mariadb) or number (Prisma's meta: text). */
export const MYSQL_CONFLICTS: ReadonlySet<unknown> = new Set(['ER_LOCK_DEADLOCK', 1213, '1213', 'P2034']);
