/**
 * A lease runs from the moment it is written. An acquisition that waited for the lease row's lock
 * (its previous holder paused in the middle of a settle) must not grant a lease that has already
 * run out, or a second node takes the partition at once while the first starts delivering it.
 * Found through the "unexplained" duplicates of the 35-minute chaos run on Postgres, and of the
 * 10-minute run on MariaDB (docs/reliability.md, findings 11 and 14).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer } from 'outboxer';
import { mysqlDialect } from 'outboxer/mysql2';
import { postgresDialect } from 'outboxer/pg';
import { runAtomically } from '../../src/core/database.js';
import { mariadbFixture, postgresFixture } from '../support/databases.js';
import { sleep } from '../support/random.js';

type PgFixture = Awaited<ReturnType<typeof postgresFixture>>;

const table = { schema: undefined, name: 'clocked' };
const TTL = 500;

describe('lease acquisition on postgres', () => {
  let fixture: PgFixture;
  beforeAll(async () => {
    fixture = await postgresFixture();
    await new Outboxer({
      database: fixture.database,
      relay: false,
      outboxes: { clocked: { table: 'clocked' } },
    }).migrate();
  });
  afterAll(() => fixture.close());

  test('after waiting for the row lock, grants a lease that runs from the grant', async () => {
    const first = await fixture.database.execute(
      postgresDialect.acquireLease(table, {
        outbox: 'clocked',
        partition: 0,
        owner: 'paused',
        ttl: TTL,
        now: Date.now(),
      }),
    );
    expect(first).toHaveLength(1);
    // The holder is paused inside a settle: the lease row stays locked past its expiry.
    const paused = await fixture.pool.connect();
    await paused.query('BEGIN');
    await paused.query(`SELECT 1 FROM clocked_leases WHERE outbox = 'clocked' FOR UPDATE`);
    await sleep(TTL + 100);
    const taking = fixture.database.execute(
      postgresDialect.acquireLease(table, {
        outbox: 'clocked',
        partition: 0,
        owner: 'next',
        ttl: TTL,
        now: Date.now(),
      }),
    );
    await sleep(TTL + 300); // the acquisition waits for the lock longer than a lease lasts
    await paused.query('ROLLBACK');
    paused.release();
    expect(await taking).toHaveLength(1);

    const [lease] = await fixture.query(
      `SELECT owner, lease_until > clock_timestamp() AS running FROM clocked_leases WHERE outbox = 'clocked'`,
    );
    expect(lease).toEqual({ owner: 'next', running: true });
    // So a third node cannot take it straight away.
    const third = await fixture.database.execute(
      postgresDialect.acquireLease(table, {
        outbox: 'clocked',
        partition: 0,
        owner: 'third',
        ttl: TTL,
        now: Date.now(),
      }),
    );
    expect(third).toEqual([]);
  });
});

describe('lease acquisition on mariadb', () => {
  let fixture: Awaited<ReturnType<typeof mariadbFixture>>;
  beforeAll(async () => {
    fixture = await mariadbFixture();
    await new Outboxer({
      database: fixture.database,
      relay: false,
      outboxes: { clocked: { table: 'clocked' } },
    }).migrate();
  });
  afterAll(() => fixture.close());

  const acquire = (owner: string) =>
    runAtomically(
      fixture.database,
      mysqlDialect.acquireLease(table, { outbox: 'clocked', partition: 0, owner, ttl: TTL, now: Date.now() }),
    );

  test('after waiting for the row lock, grants a lease that runs from the grant', async () => {
    expect(await acquire('paused')).toBe(1);
    // The holder is paused inside a settle: the lease row stays locked past its expiry.
    const paused = await fixture.pool.getConnection();
    await paused.beginTransaction();
    await paused.query(`SELECT 1 FROM clocked_leases WHERE outbox = 'clocked' FOR UPDATE`);
    await sleep(TTL + 100);
    const taking = acquire('next');
    await sleep(TTL + 300); // the acquisition waits for the lock longer than a lease lasts
    await paused.rollback();
    paused.release();
    expect(await taking).toBe(2);

    const [lease] = await fixture.query(
      `SELECT owner, lease_until > (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000) AS running FROM "clocked_leases" WHERE outbox = 'clocked'`,
    );
    expect(lease).toEqual({ owner: 'next', running: 1 });
    // So a third node cannot take it straight away.
    expect(await acquire('third')).toBeUndefined();
  });
});
