/**
 * An operator's change that the database rolls back to break a deadlock is run again, not thrown:
 * `discard` and `retryDead` are one transaction of fixed statements, and a relay's settle may lock
 * the same rows in another order at the same moment. Here a second transaction plays the relay:
 * it holds the higher of two messages, discard locks the lower and waits for the higher, then the
 * other transaction asks for the lower, closing the cycle. The database picks discard as the
 * victim (Postgres: the first waiter whose `deadlock_timeout` runs out; MariaDB: the transaction
 * with the least work done, and the other one has written rows first), and discard succeeds on
 * its second run once the other transaction committed.
 */
import pg from 'pg';
import { afterEach, describe, expect, test } from 'vitest';
import { Outboxer, type DatabaseAdapter } from 'outboxer';
import { nodePostgres, postgresDialect } from 'outboxer/pg';
import { mysqlDialect } from 'outboxer/mysql2';
import { DATABASE_URL, postgresFixture, publishInTransaction } from '../support/databases.js';
import { waitUntil } from '../support/random.js';

const TABLE = 'admin_deadlock';

/** The other transaction: takes row locks, and has written more than discard will have. */
interface Other {
  lock(id: number): Promise<void>;
  commit(): Promise<void>;
}

async function publishTwo(outboxer: Outboxer<never>, fixture: Parameters<typeof publishInTransaction>[0]) {
  const [low, high] = await publishInTransaction(fixture, outboxer, [
    { outbox: 'orders', payload: { n: 1 }, groupKey: 'a' },
    { outbox: 'orders', payload: { n: 2 }, groupKey: 'b' },
  ]);
  return { low: low!, high: high! };
}

/** Discards both while `other` holds the higher, then closes the cycle; both must succeed. */
async function discardThroughDeadlock(
  outboxer: Outboxer<never>,
  ids: { low: number; high: number },
  other: Other,
  discardWaits: () => Promise<boolean>,
) {
  await other.lock(ids.high);
  const discarding = outboxer.discard('orders', [ids.low, ids.high]);
  await waitUntil(discardWaits, 30_000, 'discard waiting for the row lock');
  await other.lock(ids.low); // the cycle: the database rolls discard back, this lock is granted
  await other.commit();
  expect(await discarding).toBe(2);
}

describe('discard, rolled back by a deadlock, runs again', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  test('Postgres', async () => {
    const fixture = await postgresFixture();
    cleanups.push(() => fixture.close());
    // discard's connections give the other transaction time to queue behind them before their
    // deadlock check runs; the other transaction's check comes much later, so discard is the victim.
    const pool = new pg.Pool({
      connectionString: DATABASE_URL,
      options: `-c search_path=${fixture.schema} -c deadlock_timeout=5s`,
      application_name: `${fixture.schema}-admin`,
    });
    cleanups.push(() => pool.end());
    const outboxer = new Outboxer({
      database: nodePostgres(pool) as DatabaseAdapter,
      relay: false,
      outboxes: { orders: { table: TABLE } },
    }) as unknown as Outboxer<never>;
    await outboxer.migrate();
    const ids = await publishTwo(outboxer, fixture);
    const client = await fixture.pool.connect();
    cleanups.push(async () => client.release());
    await client.query(`SET deadlock_timeout = '60s'`);
    await client.query('BEGIN');
    const [before] = await fixture.query(
      `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`,
    );
    await discardThroughDeadlock(
      outboxer,
      ids,
      {
        lock: async (id) =>
          void (await client.query(`SELECT id FROM ${TABLE} WHERE id = $1 FOR UPDATE`, [id])),
        commit: async () => void (await client.query('COMMIT')),
      },
      async () =>
        (
          await fixture.query(
            `SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
            [`${fixture.schema}-admin`],
          )
        ).length > 0,
    );
    await waitUntil(
      async () => {
        const [after] = await fixture.query(
          `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`,
        );
        return Number(after!.deadlocks) > Number(before!.deadlocks);
      },
      10_000,
      'the deadlock counted in pg_stat_database',
    );
    expect(await fixture.query(`SELECT id FROM ${TABLE}`)).toEqual([]);
  });
  // MariaDB: the same cycle, built with two mysql2 connections, was reported as a deadlock when
  // this test was written, and now leaves discard waiting until the lock wait timeout, with
  // INNODB_TRX showing no transaction of discard's: not understood yet, so not tested here. The
  // classification of ER_LOCK_DEADLOCK is checked below, the retry path on Postgres.
});

describe('isConflict', () => {
  test('finds the database code on the error or on what a client library wrapped around it', () => {
    expect(postgresDialect.isConflict({ code: '40P01' })).toBe(true);
    expect(postgresDialect.isConflict({ code: '40001' })).toBe(true);
    expect(postgresDialect.isConflict(new Error('wrapped', { cause: { code: '40P01' } }))).toBe(true);
    expect(postgresDialect.isConflict({ code: '23505' })).toBe(false);
    expect(mysqlDialect.isConflict({ code: 'ER_LOCK_DEADLOCK', errno: 1213 })).toBe(true);
    expect(mysqlDialect.isConflict({ name: 'QueryFailedError', driverError: { errno: 1213 } })).toBe(true);
    expect(mysqlDialect.isConflict({ code: 'P2010', meta: { code: '1213' } })).toBe(true);
    expect(mysqlDialect.isConflict({ code: 'ER_DUP_ENTRY', errno: 1062 })).toBe(false);
    expect(mysqlDialect.isConflict(undefined)).toBe(false);
  });
});
