/**
 * `outboxer/kysely`: PostgreSQL, MySQL/MariaDB or SQLite through Kysely.
 * @packageDocumentation
 */
export { kysely, type KyselyDatabase, type KyselyOptions, type KyselyTransaction } from './kysely.js';
export type { DataLayerOptions } from '../shared/engine-side.js';
export { mysqlSchemaSql } from '../../dialects/mysql/schema-sql.js';
export { postgresSchemaSql } from '../../dialects/postgres/schema-sql.js';
export { sqliteSchemaSql } from '../../dialects/sqlite/schema-sql.js';
