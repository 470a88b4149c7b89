/**
 * `outboxer/mysql2`: MySQL 8 and MariaDB 10.6+ through mysql2's promise API.
 * @packageDocumentation
 */
export {
  mysql2,
  type Mysql2ConnectionLike,
  type Mysql2PoolLike,
  type Mysql2TransactionConnection,
} from './mysql2.js';
export { mysqlDialect } from '../../dialects/mysql/mysql-dialect.js';
export { mysqlSchema } from '../../dialects/mysql/mysql-schema.js';
export { mysqlSchemaSql } from '../../dialects/mysql/schema-sql.js';
