/**
 * The poll that finds nothing on Postgres and MariaDB also reads the partition's earliest retry and
 * the database's clock, which an idle worker sleeps by: an idle partition then costs one statement
 * per `pollInterval`, not two. A poll that finds messages carries none (the worker does not sleep).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer } from 'outboxer';
import type { DatabaseAdapter } from '../../src/core/database.js';
import { NOW_MS } from '../../src/dialects/mysql/shared.js';
import { mariadbFixture, postgresFixture, publishInTransaction, type Fixture } from '../support/databases.js';
import { firstPoll } from '../support/poll-params.js';

const TABLE = 'empty_poll';
const table = { schema: undefined, name: TABLE };

describe.each([
  { name: 'Postgres', make: () => postgresFixture() },
  { name: 'MariaDB', make: () => mariadbFixture() },
])('the empty poll on $name', ({ make }) => {
  let fixture: Fixture;
  let outboxer: Outboxer<never, false>;
  /** The worker's first poll of partition 0, run and read. */
  const poll = async () => {
    const statement = (fixture.database as DatabaseAdapter).dialect.poll(table, firstPoll());
    return statement.read(await fixture.query(statement.text, [...statement.values]));
  };
  /** The database's clock, Unix ms. */
  const databaseNow = async () => {
    const text =
      fixture.kind === 'postgres'
        ? 'SELECT (extract(epoch FROM now()) * 1000)::float8 AS now'
        : `SELECT ${NOW_MS} AS now`;
    return Number((await fixture.query(text))[0]!.now);
  };

  beforeAll(async () => {
    fixture = await make();
    outboxer = new Outboxer({
      database: fixture.database,
      relay: false,
      outboxes: { o: { table: TABLE, partitions: 1 } },
    } as never) as Outboxer<never, false>;
    await outboxer.migrate();
  });
  afterAll(() => fixture.close());

  test('nothing waits: no next retry, and the clock', async () => {
    const before = await databaseNow();
    const result = await poll();
    expect(result.messages).toEqual([]);
    expect(result.nextRetry?.at).toBeNull();
    expect(result.nextRetry!.now).toBeGreaterThanOrEqual(before);
  });

  test('a retry waits: its time, as the row holds it', async () => {
    await publishInTransaction(fixture, outboxer, [{ outbox: 'o', payload: 1, groupKey: 'g' }]);
    const later =
      fixture.kind === 'postgres'
        ? `UPDATE ${TABLE} SET status = 1, next_attempt_at = now() + interval '1 minute' RETURNING (extract(epoch FROM next_attempt_at) * 1000)::float8 AS at`
        : `UPDATE ${TABLE} SET status = 1, next_attempt_at = ${NOW_MS} + 60000`;
    const returned = await fixture.query(later);
    const at =
      fixture.kind === 'postgres'
        ? Number(returned[0]!.at)
        : Number((await fixture.query(`SELECT next_attempt_at AS at FROM ${TABLE}`))[0]!.at);
    const result = await poll();
    expect(result.messages).toEqual([]);
    expect(result.nextRetry?.at).toBeCloseTo(at, -1);
    expect(result.nextRetry!.at! - result.nextRetry!.now).toBeGreaterThan(50_000);
  });

  test('a poll that finds messages carries no next retry', async () => {
    await publishInTransaction(fixture, outboxer, [{ outbox: 'o', payload: 2, groupKey: 'h' }]);
    const result = await poll();
    expect(result.messages).toHaveLength(1);
    expect(result.nextRetry).toBeUndefined();
  });
});
