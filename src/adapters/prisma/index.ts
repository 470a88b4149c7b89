/**
 * `outboxer/prisma`: PostgreSQL, MySQL and MariaDB through the interactive transactions of Prisma 7,
 * or Prisma 6.19 with its Rust-free client (`engineType = "client"`), on driver adapters.
 * @packageDocumentation
 */
export { prisma, type PrismaClientLike, type PrismaOptions, type PrismaTransactionClient } from './prisma.js';
export type { DataLayerOptions } from '../shared/engine-side.js';
export { postgresSchemaSql } from '../../dialects/postgres/schema-sql.js';
export { mysqlSchemaSql } from '../../dialects/mysql/schema-sql.js';
