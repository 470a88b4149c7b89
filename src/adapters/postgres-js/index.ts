/**
 * `outboxer/postgres-js`: PostgreSQL through postgres.js (`postgres`).
 * @packageDocumentation
 */
export { postgresJs, type PostgresJsSql, type PostgresJsTransaction } from './postgres-js.js';
export type { DataLayerOptions } from '../shared/engine-side.js';
export { postgresSchemaSql } from '../../dialects/postgres/schema-sql.js';
