import { OutboxerError } from './errors.js';

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
      `Option "${option}" must match ${pattern} (letters, digits and underscores, starting with a letter or underscore); got ${JSON.stringify(value)}.`,
    );
  }
  return value;
}

// Shorter than an identifier: the companion tables and indexes append up to 15 characters.
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,47}$/;

export function parseTableName(
  value: unknown,
  option: string,
  defaultSchema: string | undefined,
): QualifiedName {
  if (typeof value !== 'string')
    return { schema: undefined, name: validateIdentifier(value, option, TABLE_NAME) };
  const parts = value.split('.');
  if (parts.length === 2) {
    return {
      schema: validateIdentifier(parts[0], option),
      name: validateIdentifier(parts[1], option, TABLE_NAME),
    };
  }
  return { schema: defaultSchema, name: validateIdentifier(value, option, TABLE_NAME) };
}

/** A companion table (`<table>_leases`, …) in the same schema. */
export function companion(table: QualifiedName, suffix: string): QualifiedName {
  return { schema: table.schema, name: `${table.name}_${suffix}` };
}

/** `"schema"."name"`: safe because both parts passed {@link validateIdentifier}. */
export function quoteName(table: QualifiedName): string {
  return table.schema === undefined ? `"${table.name}"` : `"${table.schema}"."${table.name}"`;
}

export function sameTable(a: QualifiedName, b: QualifiedName): boolean {
  return a.schema === b.schema && a.name === b.name;
}
