/**
 * `outboxer/better-sqlite3`: SQLite through better-sqlite3 (synchronous publish).
 * @packageDocumentation
 */
export { betterSqlite3, type BetterSqlite3DatabaseLike } from './better-sqlite3.js';
export { sqliteDialect } from '../../dialects/sqlite/sqlite-dialect.js';
export { sqliteSchemaSql } from '../../dialects/sqlite/schema-sql.js';
