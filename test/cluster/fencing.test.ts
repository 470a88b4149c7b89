/**
 * Fencing of the settle's retry and dead-letter writes, statement by statement: a worker whose
 * partition moved on (a stale epoch, or another owner) runs its settle while the rows still exist,
 * as when the new owner failed them once and they wait for their retry. Nothing may change. The
 * end-to-end paused-worker test in partitions.test.ts cannot show this: there the new owner has
 * already deleted the rows.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { Outboxer, type Dialect } from 'outboxer';
import { sqliteDialect } from 'outboxer/better-sqlite3';
import { mysqlDialect } from 'outboxer/mysql2';
import { postgresDialect } from 'outboxer/pg';
import { run } from '../../src/core/database.js';
import {
  mariadbFixture,
  postgresFixture,
  publishInTransaction,
  sqliteFixture,
  type Fixture,
} from '../support/databases.js';
import { sleep } from '../support/random.js';

type SettleParams = Parameters<Dialect['settle']>[1];
type Lease = SettleParams['lease'];

const table = { schema: undefined, name: 'fenced' };
const outbox = 'fenced';

const cases: Array<{ name: string; make: () => Promise<Fixture>; dialect: Dialect }> = [
  { name: 'postgres', make: () => postgresFixture(), dialect: postgresDialect },
  { name: 'sqlite', make: async () => sqliteFixture(), dialect: sqliteDialect },
  { name: 'mariadb', make: () => mariadbFixture(), dialect: mysqlDialect },
];

describe.each(cases)('settle on $name is fenced on the lease', ({ make, dialect }) => {
  let fixture: Fixture;
  let ids: number[];
  let stale: Lease;
  let current: Lease;

  let outboxer: Outboxer<never, boolean>;

  beforeAll(async () => {
    fixture = await make();
    outboxer = new Outboxer({
      database: fixture.database,
      relay: false,
      outboxes: { [outbox]: { table: 'fenced', partitions: 1 } },
    }) as Outboxer<never, boolean>;
    await outboxer.migrate();
    // The old owner's lease runs out and the new owner takes the partition (epoch 2).
    const acquire = async (owner: string, ttl: number) => {
      const epoch = await run(
        fixture.database,
        dialect.acquireLease(table, { outbox, partition: 0, owner, ttl, now: Date.now() }),
      );
      return { outbox, partition: 0, owner, epoch: epoch! };
    };
    stale = await acquire('old', 1);
    await sleep(50);
    current = await acquire('new', 3_600_000);
    expect(current.epoch).toBe(stale.epoch + 1);
  });

  // Each test starts from the same rows, so one that changed them cannot hide another's change.
  beforeEach(async () => {
    await fixture.query(`DELETE FROM fenced`);
    ids = await publishInTransaction(
      fixture,
      outboxer,
      ['a1', 'a2', 'b1', 'c1'].map((p) => ({ outbox, payload: p, groupKey: p[0]! })),
    );
    // The new owner failed the first three once: they wait for their retry, an hour away.
    const renewed = await run(
      fixture.database,
      dialect.settle(
        table,
        settleParams(current, {
          failed: ids
            .slice(0, 3)
            .map((id) => ({ id, error: 'new owner: broker down', dead: false, delay: 3_600_000 })),
        }),
      ),
    );
    expect(renewed.leaseHeld).toBe(true);
  });

  afterAll(() => fixture.close());

  function settleParams(lease: Lease, change: Partial<SettleParams>): SettleParams {
    return {
      lease,
      now: Date.now(),
      delivered: [],
      failed: [],
      unblockedGroups: [],
      keep: false,
      ttl: 30_000,
      parkDead: false,
      ...change,
    };
  }

  const rows = () =>
    fixture.query(
      `SELECT id, status, attempts, last_error, next_attempt_at, failing_since FROM fenced ORDER BY id`,
    );

  /** Runs a settle as the worker does; whether it found the lease still its own. */
  async function settleAs(params: SettleParams): Promise<boolean> {
    const statements = dialect.settle(table, params);
    const results =
      statements.length === 1
        ? [await fixture.database.execute(statements[0]!)]
        : await fixture.database.executeAtomically(statements);
    return statements.read(results).leaseHeld;
  }

  const strangers = () => [
    { label: 'a stale epoch', lease: stale },
    { label: 'the current epoch under another owner', lease: { ...current, owner: 'old' } },
  ];

  test('the retries are in place before the stale settles run', async () => {
    const before = await rows();
    expect(before.map((r) => [Number(r.status), Number(r.attempts)])).toEqual([
      [1, 1],
      [1, 1],
      [1, 1],
      [0, 0],
    ]);
  });

  test.each([
    {
      what: 'dead-letters',
      change: () => ({
        failed: ids.map((id) => ({ id, error: 'old owner: poison', dead: true, delay: 0 })),
        unblockedGroups: ['a', 'b'],
      }),
    },
    {
      what: 'schedules retries',
      change: () => ({
        failed: ids.map((id) => ({ id, error: 'old owner: timeout', dead: false, delay: 0 })),
      }),
    },
    {
      what: 'acknowledges some and dead-letters the rest',
      change: () => ({
        delivered: [ids[0]!, ids[3]!],
        failed: [ids[1]!, ids[2]!].map((id) => ({ id, error: 'old owner: poison', dead: true, delay: 0 })),
        unblockedGroups: ['a'],
      }),
    },
    {
      what: 'acknowledges some, kept, and retries the rest',
      change: () => ({
        delivered: [ids[0]!, ids[3]!],
        failed: [ids[1]!, ids[2]!].map((id) => ({ id, error: 'old owner: timeout', dead: false, delay: 0 })),
        keep: true,
      }),
    },
    {
      what: 'parks dead messages',
      change: () => ({
        failed: ids.map((id) => ({ id, error: 'old owner: poison', dead: true, delay: 0 })),
        parkDead: true,
      }),
    },
  ])('a settle that $what changes no row without the lease', async ({ change }) => {
    for (const { label, lease } of strangers()) {
      const before = await rows();
      const found = await settleAs(settleParams(lease, change()));
      expect(found, label).toBe(false);
      expect(await rows(), label).toEqual(before);
    }
  });

  test('holding the rows behind a retrying head is fenced too', async () => {
    const [behind] = await publishInTransaction(fixture, outboxer, [
      { outbox, payload: 'a3', groupKey: 'a' },
    ]);
    const hold = (lease: Lease) => run(fixture.database, dialect.hold(table, lease, [behind!], ['a'], false));
    for (const { label, lease } of strangers()) {
      expect(await hold(lease), label).toEqual([]);
    }
    const status = async () =>
      Number((await fixture.query(`SELECT status FROM fenced WHERE id = ${behind}`))[0]!.status);
    expect(await status()).toBe(0);
    expect(await hold(current)).toEqual([behind]);
    expect(await status()).toBe(2);
  });

  test('the control: the same settle with the lease does change the rows', async () => {
    const before = await rows();
    const found = await settleAs(
      settleParams(current, {
        failed: [{ id: ids[3]!, error: 'new owner: poison', dead: true, delay: 0 }],
      }),
    );
    expect(found).toBe(true);
    const after = await rows();
    expect(after.slice(0, 3)).toEqual(before.slice(0, 3));
    expect(after[3]).toMatchObject({ id: before[3]!.id, last_error: 'new owner: poison' });
    expect(Number(after[3]!.status)).toBe(3);
  });
});
