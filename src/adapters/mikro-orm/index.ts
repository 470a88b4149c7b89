/**
 * `outboxer/mikro-orm`: PostgreSQL through MikroORM 6.
 * @packageDocumentation
 */
export {
  mikroOrm,
  type MikroOrmConnection,
  type MikroOrmEntityManager,
  type MikroOrmLike,
} from './mikro-orm.js';
export type { DataLayerOptions } from '../shared/engine-side.js';
export { postgresSchemaSql } from '../../dialects/postgres/schema-sql.js';
