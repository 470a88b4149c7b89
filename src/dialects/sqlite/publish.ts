import type { InsertRow } from '../../core/dialect.js';
import { quoteName, type QualifiedName } from '../../core/identifiers.js';
import type { Row, Statement } from '../../core/sql.js';
import { Parameters } from '../shared/parameters.js';

/**
 * Up to this many rows, an insert lists them in `VALUES` (six parameters a row): SQLite
 * parses no JSON then, and a prepared statement per row count is cached by the adapter. Above it,
 * one JSON parameter read with `json_each`, whatever the count.
 */
const VALUES_ROWS = 200;

const INSERT_COLUMNS = `(outbox, partition, group_key, type, payload, headers)`;

/** One row of a `VALUES` insert, its values in {@link INSERT_COLUMNS} order. */
function valuesRow(p: Parameters, r: InsertRow): string {
  return `(${p.add(r.outbox)}, ${p.add(r.partition)}, ${p.add(r.groupKey)}, ${p.add(r.type)}, ${p.add(r.payload)}, ${p.add(r.headers)})`;
}

/**
 * The text of a `VALUES` insert of each row count, kept: the same string each time, so the
 * adapter's statement cache finds it without hashing kilobytes of text per publish.
 */
const valuesInserts = new Map<string, string>();

/** The inserted ids, ascending: the order of the rows given. */
const readIds = (rows: readonly Row[]): number[] => rows.map((row) => Number(row.id)).sort((a, b) => a - b);

export function insert(table: QualifiedName, rows: readonly InsertRow[]): Statement<number[]> {
  const t = quoteName(table);
  const p = Parameters.positional();
  if (rows.length <= VALUES_ROWS) {
    // Rows are inserted in the order listed, so ids come in the order given. Every row adds its
    // values; the text of a row count is built once (a row's placeholders never change).
    const listed = rows.map((r) => valuesRow(p, r));
    const key = `${rows.length} ${t}`;
    let text = valuesInserts.get(key);
    if (text === undefined) {
      text = `INSERT INTO ${t} ${INSERT_COLUMNS} VALUES ${listed.join(', ')} RETURNING id`;
      valuesInserts.set(key, text);
    }
    return p.statement(text, readIds);
  }
  // One parameter whatever the row count; ORDER BY key keeps ids in the order given.
  const data = rows.map((r) => [r.outbox, r.partition, r.groupKey, r.type, r.payload, r.headers]);
  return p.statement(
    `INSERT INTO ${t} ${INSERT_COLUMNS}
SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5 FROM json_each(${p.json(data)}) ORDER BY key
RETURNING id`,
    readIds,
  );
}
