import type { DatabaseAdapter, Row, SqlQuery } from '../../core/database.js';
import { OutboxerError } from '../../core/errors.js';
import { invalidOption } from '../../core/options.js';
import { postgresDialect } from '../../dialects/postgres/postgres-dialect.js';
import { withArrayLiterals } from '../shared/postgres-values.js';
import { resolveRelaySide, type DataLayerOptions, type EngineSide } from '../shared/engine-side.js';
import { explainingFailedTransaction } from '../shared/failed-transaction.js';

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

/** The part of a `PrismaClient` (Prisma 7, with a Postgres driver adapter) outboxer uses. */
export interface PrismaClientLike extends PrismaRawQueries {
  $connect(): PromiseLike<void>;
  $transaction<T>(
    fn: (tx: PrismaTransactionClient) => PromiseLike<T>,
    options?: { maxWait?: number; timeout?: number },
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
}

/**
 * Statements whose rows nobody reads and that Prisma cannot read: the migration lock returns a
 * column of type `void`, which `$queryRawUnsafe` refuses to deserialize.
 */
const UNREAD_STATEMENTS = new Set(postgresDialect.migrationLock().map((query) => query.text));

/**
 * The Prisma adapter (Prisma 7 with `@prisma/adapter-pg`; Postgres only). Publish with the `tx`
 * of an interactive transaction, `prisma.$transaction(async (tx) => …)`; statements run through
 * `tx.$queryRawUnsafe(text, ...values)` with `$n` placeholders. A batch transaction
 * (`$transaction([…])`) cannot publish: it takes queries, not a callback.
 *
 * The relay side runs on the `PrismaClient` (`$queryRawUnsafe`, and interactive transactions for
 * settlements). Prisma has no LISTEN: with `notify: true`, pass `notifications: nodePostgres(pool)`
 * or relays find new messages by polling.
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
  // Not public API: only a guard against a client generated for another database.
  const provider = (client as { _activeProvider?: unknown })._activeProvider;
  if (typeof provider === 'string' && provider !== 'postgresql' && provider !== 'postgres') {
    throw new OutboxerError(
      'DATABASE_UNSUPPORTED',
      `prisma(client): outboxer supports Prisma on PostgreSQL; this client is for ${provider}.`,
    );
  }
  const transactionOptions = { maxWait: 10_000, timeout: 60_000, ...options?.transactionOptions };
  const own: EngineSide = {
    execute: (query) => run(client, query),
    executeAtomically: async (queries) =>
      client.$transaction(async (tx) => {
        const results: Row[][] = [];
        for (const query of queries) results.push(await run(tx, query));
        return results;
      }, transactionOptions),
  };
  return {
    dialect: postgresDialect,
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
      return explainingFailedTransaction(run(tx, query));
    },
    ...resolveRelaySide('prisma', postgresDialect, own, options, ['transactionOptions']),
  };
}

async function run(client: PrismaRawQueries, query: SqlQuery): Promise<Row[]> {
  const values = withArrayLiterals(query.values) as never[];
  if (UNREAD_STATEMENTS.has(query.text)) {
    await client.$executeRawUnsafe(query.text, ...values);
    return [];
  }
  return (await client.$queryRawUnsafe(query.text, ...values)) as Row[];
}
