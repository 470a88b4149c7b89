/**
 * `outboxer/pg`: PostgreSQL through node-postgres.
 * @packageDocumentation
 */
export {
  nodePostgres,
  type NodePostgresOptions,
  type PgPoolLike,
  type PgTransactionClient,
} from './node-postgres.js';
export { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';
export { postgresSchemaSql } from '../../dialects/postgres/schema-sql.js';
