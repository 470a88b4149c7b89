import { parseTableName } from '../../core/identifiers.js';
import { sqliteSchema } from './sqlite-schema.js';

/** The DDL `migrate()` runs on SQLite, as one script for your own migration tool. Idempotent. */
export function sqliteSchemaSql(options: { table?: string; schema?: string } = {}): string {
  const table = parseTableName(options.table ?? 'outboxer_messages', 'table', options.schema);
  return sqliteSchema(table)
    .map((statement) => `${statement};\n`)
    .join('\n');
}
