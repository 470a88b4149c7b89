/**
 * `outboxer/typeorm`: PostgreSQL, MySQL and MariaDB through TypeORM.
 * @packageDocumentation
 */
export {
  typeorm,
  type TypeOrmDataSource,
  type TypeOrmEntityManager,
  type TypeOrmOptions,
  type TypeOrmQueryRunner,
  type TypeOrmTransaction,
} from './typeorm.js';
export type { DataLayerOptions } from '../shared/engine-side.js';
export { postgresSchemaSql } from '../../dialects/postgres/schema-sql.js';
export { mysqlSchemaSql } from '../../dialects/mysql/schema-sql.js';
