import type { InsertOptions, InsertRow } from '../../core/dialect.js';
import type { QualifiedName } from '../../core/identifiers.js';
import { batch, type Batch, type SqlQuery } from '../../core/sql.js';
import { Parameters } from '../shared/parameters.js';
import { NOW_MS, PARTITION, TALLY_COLUMNS } from './shared.js';
import { tables } from './tables.js';

/**
 * Publishing: the statements a publisher runs in its own transaction, one after another.
 *
 * 0. `SET`, which writes nothing: the adapter reads from its reply whether a transaction is open,
 *    and refuses the publish before anything is written when not (`NOT_IN_TRANSACTION`); an
 *    adapter that cannot read it runs {@link transactionProbe} first (`checksTransaction`).
 * 1. With `serializeWrites`, one row per (outbox, group key) of `<table>_groups`, upserted: the
 *    INSERT takes an exclusive lock on the row, new or found (`ON DUPLICATE KEY UPDATE` locks the
 *    duplicate exclusively, where `INSERT IGNORE` would take a shared lock and let two publishers
 *    deadlock upgrading it), held until the transaction ends. A second publisher of the group waits
 *    here, before its message takes an id, so within a group ids follow commit order. Keys in sorted
 *    order, so two publishers of overlapping groups in one call cannot deadlock. MySQL has no
 *    transaction-scoped advisory lock (`GET_LOCK` belongs to the session: it outlives the commit and
 *    is lost to a pooler), so this is the lock that survives both.
 * 2. The INSERT, one row per message in the order given; it takes no lock anyone waits on.
 * 3. The ids it drew: `LAST_INSERT_ID()` is the first, and one multi-row `INSERT … VALUES` (a
 *    "simple insert") draws its ids consecutively, `auto_increment_increment` apart, on MariaDB
 *    (autoinc lock mode 1, its default) and on MySQL 8 (mode 2 reserves a simple insert's ids at
 *    once). MySQL 8 has no `RETURNING`, MariaDB only since 10.5: this runs on both.
 * 4. The tally of the rows per partition, inserted (never a counter row publishers would queue on).
 */
export function insert(
  table: QualifiedName,
  rows: readonly InsertRow[],
  options: InsertOptions,
): Batch<number[]> {
  const { messages, tallies, groups } = tables(table);
  // Writes nothing: its reply's server status tells the adapter whether a transaction is open
  // before anything is written (MySQL runs a statement outside one in autocommit).
  const statements: SqlQuery[] = [
    { text: `SET @outboxer_publishing = 1`, values: [], prepare: true, checksTransaction: true },
  ];
  if (options.serialize) {
    const keys = lockKeys(rows);
    if (keys.length > 0) {
      const p = Parameters.positional();
      const values = keys.map(([outbox, key]) => `(${p.add(outbox)}, ${p.add(key)})`).join(', ');
      statements.push(
        p.query(
          `INSERT INTO ${groups} (outbox, group_key) VALUES ${values} ON DUPLICATE KEY UPDATE group_key = group_key`,
        ),
      );
    }
  }
  const p = Parameters.positional();
  const values = rows
    .map(
      (r) =>
        `(${p.add(r.outbox)}, ${p.add(r.partition)}, ${p.add(r.groupKey)}, ${p.add(r.type)}, ${p.add(r.payload)}, ${p.add(r.headers)}, ${NOW_MS})`,
    )
    .join(', ');
  statements.push(
    p.query(
      `INSERT INTO ${messages} (outbox, ${PARTITION}, group_key, type, payload, headers, inserted_at) VALUES ${values}`,
      true,
    ),
  );
  const idsAt = statements.length;
  statements.push({
    text: `SELECT LAST_INSERT_ID() AS first_id, @@auto_increment_increment AS step`,
    values: [],
    prepare: true,
  });
  const t = Parameters.positional();
  const tallied = [...countByPartition(rows)]
    .map(
      ([, { outbox, partition, count }]) => `(${t.add(outbox)}, ${t.add(partition)}, ${t.add(count)}, 0, 0)`,
    )
    .join(', ');
  statements.push(t.query(`INSERT INTO ${tallies} ${TALLY_COLUMNS} VALUES ${tallied}`));
  return batch(statements, (results) => {
    const row = results[idsAt]?.[0];
    const first = Number(row?.first_id);
    const step = Number(row?.step ?? 1);
    return rows.map((_, i) => first + i * step);
  });
}

/**
 * Whether the connection is inside a transaction, for an adapter whose library passes on neither
 * the server status of a reply nor a way to ask (Kysely, Prisma), run before a statement marked
 * `checksTransaction` by adapters/shared/mysql-results.ts: outside one, MySQL and MariaDB commit
 * the SAVEPOINT at once (it is gone), and the RELEASE fails with {@link NO_SUCH_SAVEPOINT},
 * having written nothing. (MariaDB's `@@in_transaction` would say it in one statement; MySQL 8
 * has no such variable.)
 */
export const transactionProbe: readonly SqlQuery[] = Object.freeze([
  { text: 'SAVEPOINT outboxer_in_transaction', values: [], rowless: true },
  { text: 'RELEASE SAVEPOINT outboxer_in_transaction', values: [], rowless: true },
]);

/** `ER_SP_DOES_NOT_EXIST`: the error number of a RELEASE of a savepoint that does not exist. */
export const NO_SUCH_SAVEPOINT = 1305;

/** The distinct (outbox, group key) pairs of `rows`, sorted: the order their locks are taken in. */
function lockKeys(rows: readonly InsertRow[]): Array<[string, string]> {
  const keys = new Map<string, [string, string]>();
  for (const row of rows) {
    if (row.groupKey !== null)
      keys.set(JSON.stringify([row.outbox, row.groupKey]), [row.outbox, row.groupKey]);
  }
  return [...keys.values()].sort(([ao, ak], [bo, bk]) =>
    ao === bo ? (ak < bk ? -1 : ak > bk ? 1 : 0) : ao < bo ? -1 : 1,
  );
}

function countByPartition(
  rows: readonly InsertRow[],
): Map<string, { outbox: string; partition: number; count: number }> {
  const counts = new Map<string, { outbox: string; partition: number; count: number }>();
  for (const { outbox, partition } of rows) {
    const key = JSON.stringify([outbox, partition]);
    const entry = counts.get(key) ?? { outbox, partition, count: 0 };
    entry.count += 1;
    counts.set(key, entry);
  }
  return counts;
}
