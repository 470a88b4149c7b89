import type { Row } from '../../core/database.js';

/** `timestamp` and `timestamptz`. */
const TIMESTAMP_OIDS = new Set([1114, 1184]);

/**
 * Turns the timestamp columns of `rows` that came back as text into dates, in place. The core reads
 * `inserted_at` and `next_attempt_at` as dates, and some libraries make their connections return
 * timestamps as text: MikroORM's Postgres connection, and the postgres.js client under Drizzle.
 * `columns` is the driver's column metadata (`fields` of node-postgres, `columns` of postgres.js).
 */
export function timestampsAsDates(
  rows: Row[],
  columns: ReadonlyArray<{ name: string; type: number }> | undefined,
): Row[] {
  const names =
    columns?.filter((column) => TIMESTAMP_OIDS.has(column.type)).map((column) => column.name) ?? [];
  if (names.length === 0) return rows;
  for (const row of rows) {
    for (const name of names) {
      const value = row[name];
      if (typeof value === 'string') row[name] = new Date(value);
    }
  }
  return rows;
}
