/**
 * `outboxer/drizzle`: PostgreSQL (node-postgres, postgres.js), MySQL/MariaDB (mysql2) or SQLite (better-sqlite3) through Drizzle ORM.
 * @packageDocumentation
 */
export {
  drizzle,
  type DrizzleMysqlDatabase,
  type DrizzleMysqlTransaction,
  type DrizzlePgDatabase,
  type DrizzlePgTransaction,
  type DrizzleSqliteDatabase,
  type DrizzleSqliteTransaction,
} from './drizzle.js';
export type { DataLayerOptions } from '../shared/engine-side.js';
export { mysqlSchemaSql } from '../../dialects/mysql/schema-sql.js';
export { postgresSchemaSql } from '../../dialects/postgres/schema-sql.js';
export { sqliteSchemaSql } from '../../dialects/sqlite/schema-sql.js';
