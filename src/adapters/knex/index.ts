/**
 * `outboxer/knex`: PostgreSQL or MySQL/MariaDB (client mysql2) through Knex.
 * @packageDocumentation
 */
export { knex, type KnexLike, type KnexTransaction } from './knex.js';
export type { DataLayerOptions } from '../shared/engine-side.js';
export { mysqlSchemaSql } from '../../dialects/mysql/schema-sql.js';
export { postgresSchemaSql } from '../../dialects/postgres/schema-sql.js';
