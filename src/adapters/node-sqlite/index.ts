/**
 * `outboxer/node-sqlite`: SQLite through Node's built-in `node:sqlite` (`DatabaseSync`, Node
 * 22.16+), with synchronous publish and no native module to compile.
 * @packageDocumentation
 */
export { nodeSqlite, type NodeSqliteDatabaseLike } from './node-sqlite.js';
export { sqliteDialect } from '../../dialects/sqlite/sqlite-dialect.js';
export { sqliteSchemaSql } from '../../dialects/sqlite/schema-sql.js';
