import type { DatabaseAdapter, Dialect, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { invalidOption } from '../../core/options.js';
import { mysqlDialect } from '../../dialects/mysql/mysql-dialect.js';
import { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';
import { withArrayLiterals } from '../shared/postgres-values.js';
import { resolveRelaySide, type DataLayerOptions, type EngineSide } from '../shared/engine-side.js';
import { explainingFailedTransaction } from '../shared/failed-transaction.js';
import { checkTransactionWithSavepoint } from '../shared/mysql-results.js';
import { chooseOrmDialect, type OrmDialectName } from '../shared/choose-dialect.js';
import { plainMysqlRows } from './mysql-values.js';

interface PrismaRawQueries {
  $queryRawUnsafe(query: string, ...values: never[]): PromiseLike<unknown>;
  $executeRawUnsafe(query: string, ...values: never[]): PromiseLike<number>;
}

/**
 * The client of an interactive transaction: the `tx` of `prisma.$transaction(async (tx) => …)`.
 * Prisma leaves `$connect` out of it, so passing the `PrismaClient` itself is a type error.
 */
export interface PrismaTransactionClient extends PrismaRawQueries {
  readonly $connect?: never;
}

/**
 * The part of a `PrismaClient` (Prisma 7, or Prisma 6.19 generated with `engineType = "client"`,
 * with a Postgres or MySQL driver adapter) outboxer uses.
 */
export interface PrismaClientLike extends PrismaRawQueries {
  $connect(): PromiseLike<void>;
  $transaction<T>(
    fn: (tx: PrismaTransactionClient) => PromiseLike<T>,
    options?: { maxWait?: number; timeout?: number; isolationLevel?: 'ReadCommitted' },
  ): PromiseLike<T>;
}

/** Options of {@link prisma}. */
export interface PrismaOptions extends DataLayerOptions {
  /**
   * Limits of the interactive transactions the relay side opens (`migrate()`, settlements):
   * milliseconds to wait for a connection and for the transaction to finish. Default
   * `{ maxWait: 10000, timeout: 60000 }`.
   */
  transactionOptions?: { maxWait?: number; timeout?: number };
  /**
   * The database behind the client: `'postgres'` (`@prisma/adapter-pg`), or `'mysql'` for MySQL 8
   * and MariaDB 10.6+ (`@prisma/adapter-mariadb`). Default: the provider the client was generated
   * for (`postgresql`; `mysql`). When both are known they must agree.
   */
  dialect?: 'postgres' | 'mysql';
}

/** The providers outboxer runs on, and the dialect of each. */
const DIALECT_OF_PROVIDER = new Map<string, OrmDialectName>([
  ['postgresql', 'postgres'],
  ['postgres', 'postgres'],
  ['mysql', 'mysql'],
]);

/**
 * Statements whose rows nobody reads and that Prisma cannot read: the migration lock returns a
 * column of type `void`, which `$queryRawUnsafe` refuses to deserialize.
 */
const UNREAD_STATEMENTS = new Set(postgresDialect.migrationLock().map((query) => query.text));

/**
 * The Prisma adapter (Prisma 7, or Prisma 6.19 with `engineType = "client"`, on a driver adapter):
 * PostgreSQL with `@prisma/adapter-pg`, and MySQL 8 and MariaDB 10.6+ with `@prisma/adapter-mariadb`
 * (on Prisma 6 only publishing: pass `relayDatabase: mysql2(pool)` for the relay side). Publish with the `tx` of an
 * interactive transaction, `prisma.$transaction(async (tx) => …)`; statements run through
 * `tx.$queryRawUnsafe(text, ...values)` (`$n` placeholders on Postgres, `?` on MySQL). A batch
 * transaction (`$transaction([…])`) cannot publish: it takes queries, not a callback.
 *
 * The relay side runs on the `PrismaClient` (`$queryRawUnsafe`, and interactive transactions for
 * settlements, at READ COMMITTED on MySQL). Prisma has no LISTEN: on Postgres, with
 * `notify: true`, pass `notifications: nodePostgres(pool)` or relays find new messages by polling
 * (MySQL has no notifications: relays poll, and a relaying instance wakes its own workers).
 *
 * @example
 * import { PrismaPg } from '@prisma/adapter-pg';
 * import { PrismaClient } from './generated/prisma/client.js';
 * import { prisma as prismaAdapter } from 'outboxer/prisma';
 * const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString }) });
 * const outboxer = new Outboxer({ database: prismaAdapter(prisma), outboxes: { orders: { relay } } });
 * await prisma.$transaction(async (tx) => {
 *   const order = await tx.order.create({ data });
 *   await outboxer.publish(tx, 'orders', order, { groupKey: `order:${order.id}` });
 * });
 */
export function prisma(
  client: PrismaClientLike,
  options?: PrismaOptions,
): DatabaseAdapter<PrismaTransactionClient, false> {
  if (
    typeof client !== 'object' ||
    client === null ||
    typeof client.$queryRawUnsafe !== 'function' ||
    typeof client.$transaction !== 'function'
  ) {
    throw invalidOption('prisma', 'a PrismaClient', client);
  }
  // Not public API: the provider the client was generated for.
  const provider = (client as { _activeProvider?: unknown })._activeProvider;
  const dialect = chooseDialect(typeof provider === 'string' ? provider : undefined, options?.dialect);
  const mysql = dialect === mysqlDialect;
  const run = mysql ? runOnMysql : runOnPostgres;
  const transactionOptions = {
    maxWait: 10_000,
    timeout: 60_000,
    ...options?.transactionOptions,
    // MySQL: READ COMMITTED (ENGINE_ISOLATION_LEVEL in adapters/shared/mysql-results.ts) locks the
    // rows a statement changes without the gaps beside them; Postgres' default is READ COMMITTED.
    ...(mysql ? { isolationLevel: 'ReadCommitted' as const } : {}),
  };
  const own: EngineSide =
    mysql && readsBinaryTextAsBytes(client)
      ? refusingRelaySide
      : {
          execute: (query) => run(client, query),
          executeAtomically: async (queries) =>
            client.$transaction(async (tx) => {
              const results: Row[][] = [];
              for (const query of queries) results.push(await run(tx, query));
              return results;
            }, transactionOptions),
        };
  return {
    dialect,
    sync: false,
    executeInTransaction(tx, query) {
      if (typeof tx !== 'object' || tx === null || typeof tx.$queryRawUnsafe !== 'function') {
        throw new OutboxerError(
          'NOT_IN_TRANSACTION',
          'publish() needs the client of your interactive transaction: await prisma.$transaction(async (tx) => { await outboxer.publish(tx, ...) }).',
        );
      }
      if ('$connect' in tx) {
        throw new OutboxerError(
          'NOT_IN_TRANSACTION',
          'publish() was given the PrismaClient, not a transaction. Publish with the tx of prisma.$transaction(async (tx) => ...), so the message commits with your change.',
        );
      }
      if (mysql) return query.checksTransaction === true ? checkedOnMysql(tx, query) : run(tx, query);
      return explainingFailedTransaction(run(tx, query));
    },
    ...resolveRelaySide('prisma', dialect, own, options, ['transactionOptions', 'dialect']),
  };
}

function chooseDialect(provider: string | undefined, name: unknown): Dialect {
  const detected = provider === undefined ? undefined : DIALECT_OF_PROVIDER.get(provider);
  if (detected === undefined && provider !== undefined) {
    throw new OutboxerError(
      'DATABASE_UNSUPPORTED',
      `prisma(client): outboxer supports Prisma on PostgreSQL (provider "postgresql") and on MySQL or MariaDB (provider "mysql"); this client is for ${provider}.`,
    );
  }
  return chooseOrmDialect('prisma.dialect', name, detected, `the client was generated for ${provider}`);
}

/**
 * Whether the client is Prisma 6 on its MariaDB driver adapter, which types every text column with
 * a binary collation as bytes and then refuses the string the connector returns for it
 * ("Cannot serialize value of type string as Bytes"; fixed in Prisma 7 by prisma/orm#29238;
 * no 6.x has the fix). Outboxer's MySQL tables are utf8mb4_bin: the relay side, which reads them,
 * cannot run on that client, while publishing only writes.
 */
function readsBinaryTextAsBytes(client: PrismaClientLike): boolean {
  // Not public API: the version the client was generated with, and its driver adapter.
  const { _clientVersion: version, _engineConfig: config } = client as {
    _clientVersion?: unknown;
    _engineConfig?: { adapter?: { adapterName?: unknown } };
  };
  return (
    typeof version === 'string' &&
    version.startsWith('6.') &&
    config?.adapter?.adapterName === '@prisma/adapter-mariadb'
  );
}

/** The relay side of a Prisma 6 client on @prisma/adapter-mariadb: it refuses, naming the way out. */
const refusingRelaySide: EngineSide = {
  execute: refuseRelaySide,
  executeAtomically: refuseRelaySide,
};

async function refuseRelaySide(): Promise<never> {
  throw new OutboxerError(
    'DATABASE_UNSUPPORTED',
    'prisma(client): Prisma 6\'s @prisma/adapter-mariadb cannot read outboxer\'s tables (it types their utf8mb4_bin text as bytes, then fails with "Cannot serialize value of type string as Bytes"). Publishing works; run the relay side on another adapter, relayDatabase: mysql2(pool) from outboxer/mysql2, or use Prisma 7.',
  );
}

async function runOnPostgres(client: PrismaRawQueries, query: SqlQuery): Promise<Row[]> {
  const values = withArrayLiterals(query.values) as never[];
  if (UNREAD_STATEMENTS.has(query.text)) {
    await client.$executeRawUnsafe(query.text, ...values);
    return [];
  }
  return (await client.$queryRawUnsafe(query.text, ...values)) as Row[];
}

/** On MySQL `$queryRawUnsafe` returns the rows of a SELECT, and none for any other statement. */
async function runOnMysql(client: PrismaRawQueries, query: SqlQuery): Promise<Row[]> {
  const rows = (await client.$queryRawUnsafe(query.text, ...(query.values as never[]))) as Row[];
  return plainMysqlRows(rows);
}

/**
 * A statement where work begins in the caller's transaction, after the savepoint probe: Prisma
 * passes on no server status, and after InnoDB rolled the transaction back on a deadlock, Prisma's
 * `tx` runs each statement on its own, in autocommit.
 */
async function checkedOnMysql(tx: PrismaRawQueries, query: SqlQuery): Promise<Row[]> {
  await checkTransactionWithSavepoint(
    (probe) => tx.$executeRawUnsafe(probe.text),
    'Publish with the tx of prisma.$transaction(async (tx) => ...)',
  );
  return runOnMysql(tx, query);
}
