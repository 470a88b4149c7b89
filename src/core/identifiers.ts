import { OutboxerError, showValue } from './errors.js';

/** A table name split into its optional schema and the name itself, both validated. */
export interface QualifiedName {
  readonly schema: string | undefined;
  readonly name: string;
}

const SQL_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * Accepts only plain SQL identifiers (letters, digits, underscore; at most 63 characters, the
 * Postgres limit), so a name never needs escaping beyond double quotes and never carries SQL.
 */
export function validateIdentifier(value: unknown, option: string, pattern: RegExp = SQL_IDENTIFIER): string {
  if (typeof value !== 'string' || !pattern.test(value)) {
    throw new OutboxerError(
      'INVALID_IDENTIFIER',
      `Option "${option}" must match ${pattern} (letters, digits and underscores, starting with a letter or underscore); got ${showValue(value)}.`,
    );
  }
  return value;
}

// Shorter than an identifier: the companion tables and indexes append up to 15 characters.
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,47}$/;

/**
 * Splits `name` or `schema.name` and validates both parts. `defaultSchema` (the instance's `schema`
 * option, the CLI's `--schema`) is validated here too, under `schemaOption`: every path that builds
 * a table name from text goes through this function, so none can skip the check.
 */
export function parseTableName(
  value: unknown,
  option: string,
  defaultSchema: unknown,
  schemaOption = 'schema',
): QualifiedName {
  const schema = defaultSchema === undefined ? undefined : validateIdentifier(defaultSchema, schemaOption);
  if (typeof value !== 'string') return { schema, name: validateIdentifier(value, option, TABLE_NAME) };
  const parts = value.split('.');
  if (parts.length === 2) {
    return {
      schema: validateIdentifier(parts[0], option),
      name: validateIdentifier(parts[1], option, TABLE_NAME),
    };
  }
  return { schema, name: validateIdentifier(value, option, TABLE_NAME) };
}

/** A companion table (`<table>_leases`, …) in the same schema. */
export function companion(table: QualifiedName, suffix: string): QualifiedName {
  return { schema: table.schema, name: `${table.name}_${suffix}` };
}

/**
 * `"schema"."name"` (with backticks for MySQL: `quote`). Both parts are checked again here,
 * whatever built the name: this is the one place a name becomes SQL text, so a name that skipped
 * {@link parseTableName} still cannot carry SQL.
 */
export function quoteName(table: QualifiedName, quote: '"' | '`' = '"'): string {
  const { schema, name } = checkedName(table);
  const q = (part: string) => `${quote}${part}${quote}`;
  return schema === undefined ? q(name) : `${q(schema)}.${q(name)}`;
}

/** `` `schema`.`name` ``: MySQL quotes names with backticks (double quotes only with ANSI_QUOTES). */
export function quoteMysqlName(table: QualifiedName): string {
  return quoteName(table, '`');
}

/** The name itself, once both parts are checked: for DDL that quotes the parts separately. */
export function checkedName(table: QualifiedName): QualifiedName {
  quotable(table.name, 'table');
  if (table.schema !== undefined) quotable(table.schema, 'schema');
  return table;
}

function quotable(part: unknown, what: string): string {
  if (typeof part === 'string' && SQL_IDENTIFIER.test(part)) return part;
  throw new OutboxerError(
    'INVALID_IDENTIFIER',
    `Refusing to quote the ${what} name ${showValue(part)}: names are letters, digits and underscores, starting with a letter or underscore, at most 63 characters.`,
  );
}

export function sameTable(a: QualifiedName, b: QualifiedName): boolean {
  return a.schema === b.schema && a.name === b.name;
}
