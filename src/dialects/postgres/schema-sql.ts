import { parseTableName } from '../../core/identifiers.js';
import { postgresSchema } from './postgres-schema.js';

/**
 * The DDL `migrate()` runs, as one SQL script for your own migration tool (node-pg-migrate,
 * Prisma, Drizzle Kit, Flyway…). Idempotent.
 *
 * @example
 * fs.writeFileSync('migrations/001_outboxer.sql', postgresSchemaSql({ table: 'outboxer_messages' }));
 */
export function postgresSchemaSql(options: { table?: string; schema?: string } = {}): string {
  const table = parseTableName(options.table ?? 'outboxer_messages', 'table', options.schema);
  return postgresSchema(table)
    .map((statement) => `${statement};\n`)
    .join('\n');
}
