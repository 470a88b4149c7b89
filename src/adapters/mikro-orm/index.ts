/**
 * `outboxer/mikro-orm`: PostgreSQL, MySQL and MariaDB through MikroORM 7.
 * @packageDocumentation
 */
export {
  mikroOrm,
  type MikroOrmConnection,
  type MikroOrmEntityManager,
  type MikroOrmLike,
  type MikroOrmOptions,
} from './mikro-orm.js';
export type { MikroOrmNativeConnection } from './mikro-orm-relay-side.js';
export type { DataLayerOptions } from '../shared/engine-side.js';
export { postgresSchemaSql } from '../../dialects/postgres/schema-sql.js';
export { mysqlSchemaSql } from '../../dialects/mysql/schema-sql.js';
