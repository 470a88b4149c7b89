/**
 * `outboxer/knex`: PostgreSQL through Knex.
 * @packageDocumentation
 */
export { knex, type KnexLike, type KnexTransaction } from './knex.js';
export type { DataLayerOptions } from '../shared/engine-side.js';
export { postgresSchemaSql } from '../../dialects/postgres/schema-sql.js';
