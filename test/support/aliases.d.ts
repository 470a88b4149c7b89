// The older lines the tests keep beside the current one are npm aliases with no types of their own:
// they have the API of the current line's types, which is what the tests use of them.
declare module 'better-sqlite3-v12' {
  import Database from 'better-sqlite3';
  export default Database;
}
declare module 'ioredis-v5' {
  export { Redis } from 'ioredis';
}
declare module 'bullmq-v5' {
  export { Queue, Worker } from 'bullmq';
}
declare module 'typeorm-v0' {
  export { DataSource } from 'typeorm';
}
declare module 'kysely-v0.28' {
  export * from 'kysely';
}
declare module 'prisma-adapter-pg-v6' {
  export { PrismaPg } from '@prisma/adapter-pg';
}
declare module 'prisma-adapter-mariadb-v6' {
  export { PrismaMariaDb } from '@prisma/adapter-mariadb';
}
