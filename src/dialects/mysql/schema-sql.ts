import { parseTableName } from '../../core/identifiers.js';
import { mysqlSchema } from './mysql-schema.js';

/**
 * The DDL `migrate()` runs on MySQL and MariaDB, as one SQL script for your own migration tool
 * (Flyway, Liquibase, Knex, Prisma Migrate…). Idempotent.
 *
 * @example
 * fs.writeFileSync('migrations/001_outboxer.sql', mysqlSchemaSql({ table: 'outboxer_messages' }));
 */
export function mysqlSchemaSql(options: { table?: string; schema?: string } = {}): string {
  const table = parseTableName(options.table ?? 'outboxer_messages', 'table', options.schema);
  return mysqlSchema(table)
    .map((statement) => `${statement};\n`)
    .join('\n');
}
