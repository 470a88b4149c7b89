import type { Row } from '../../core/database.js';

/**
 * The rows `$queryRawUnsafe` returns on MySQL, with the values the dialect reads made plain, in
 * place. Prisma types each column from the `mariadb` connector's metadata: a BIGINT (ids, times
 * in Unix milliseconds, `LAST_INSERT_ID()`) comes back as a `bigint`, text in a binary collation
 * as bytes (`Uint8Array`), a DATETIME as a `Date`, a DECIMAL (a `SUM`) as Prisma's `Decimal`.
 * The readers compare flags with `=== 1` and parse JSON from text, so a `bigint` becomes a number
 * (a string past 2^53, which `Number()` would round) and bytes UTF-8 text. Dates and decimals are
 * left as they are: the readers take a `Date` as it is and `Number()` reads a `Decimal`.
 */
export function plainMysqlRows(rows: Row[]): Row[] {
  if (!Array.isArray(rows)) return [];
  for (const row of rows) {
    for (const [key, value] of Object.entries(row)) {
      if (typeof value === 'bigint') {
        row[key] = Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
      } else if (value instanceof Uint8Array) {
        row[key] = decoder.decode(value);
      }
    }
  }
  return rows;
}

const decoder = new TextDecoder();
