/**
 * Parameters for Postgres drivers that do not send JavaScript arrays as Postgres arrays the way
 * node-postgres does. Knex and MikroORM expand an array into a list (`?, ?, ?`), postgres.js types
 * an array by its first element (`[true, false]` becomes a `boolean`, not a `boolean[]`), and
 * drivers differ on `null` elements. The dialect casts every array parameter (`$5::bigint[]`,
 * `$5::json[]`), so sending the array as its text form (`{1,2,NULL}`) works on every driver: the
 * server parses it with the type of the cast.
 */

/**
 * The Postgres text form of an array: `{"a","b\"c",NULL}`. Every element is quoted (numbers and
 * booleans too: quoted `"1"` and `"t"` parse as integers and booleans), so no element is ever read
 * as `NULL` or split on a comma.
 *
 * @example
 * postgresArrayLiteral(['a', null, 'x,"y']); // '{"a",NULL,"x,\\"y"}'
 */
export function postgresArrayLiteral(values: readonly unknown[]): string {
  return `{${values.map(element).join(',')}}`;
}

function element(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (Array.isArray(value)) return postgresArrayLiteral(value);
  return `"${postgresText(value).replace(/[\\"]/g, '\\$&')}"`;
}

/**
 * A scalar as the text Postgres parses for it: numbers and bigints in decimal, booleans as `t`/`f`,
 * dates in ISO 8601 with the time zone, strings as they are.
 */
export function postgresText(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return value;
    case 'number':
      return Number.isFinite(value)
        ? String(value)
        : value > 0
          ? 'Infinity'
          : value < 0
            ? '-Infinity'
            : 'NaN';
    case 'bigint':
      return value.toString();
    case 'boolean':
      return value ? 't' : 'f';
    default:
      if (value instanceof Date) return value.toISOString();
      if (Array.isArray(value)) return postgresArrayLiteral(value);
      return JSON.stringify(value);
  }
}

/** The parameters with every array replaced by its text form; other values are left as they are. */
export function withArrayLiterals(values: readonly unknown[]): unknown[] {
  return values.map((value) => (Array.isArray(value) ? postgresArrayLiteral(value) : value));
}
