/**
 * `outboxer/prisma`: PostgreSQL, MySQL and MariaDB through Prisma 7 (driver adapters) interactive
 * transactions.
 * @packageDocumentation
 */
export { prisma, type PrismaClientLike, type PrismaOptions, type PrismaTransactionClient } from './prisma.js';
export type { DataLayerOptions } from '../shared/engine-side.js';
export { postgresSchemaSql } from '../../dialects/postgres/schema-sql.js';
export { mysqlSchemaSql } from '../../dialects/mysql/schema-sql.js';
