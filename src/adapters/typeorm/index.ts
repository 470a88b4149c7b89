/**
 * `outboxer/typeorm`: PostgreSQL through TypeORM.
 * @packageDocumentation
 */
export {
  typeorm,
  type TypeOrmDataSource,
  type TypeOrmEntityManager,
  type TypeOrmQueryRunner,
  type TypeOrmTransaction,
} from './typeorm.js';
export type { DataLayerOptions } from '../shared/engine-side.js';
export { postgresSchemaSql } from '../../dialects/postgres/schema-sql.js';
