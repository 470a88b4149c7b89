/**
 * `outboxer/drizzle`: PostgreSQL (node-postgres, postgres.js) or SQLite (better-sqlite3) through Drizzle ORM.
 * @packageDocumentation
 */
export {
  drizzle,
  type DrizzlePgDatabase,
  type DrizzlePgTransaction,
  type DrizzleSqliteDatabase,
  type DrizzleSqliteTransaction,
} from './drizzle.js';
export type { DataLayerOptions } from '../shared/engine-side.js';
export { postgresSchemaSql } from '../../dialects/postgres/schema-sql.js';
export { sqliteSchemaSql } from '../../dialects/sqlite/schema-sql.js';
