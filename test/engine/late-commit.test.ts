/**
 * Ids are drawn at insert, not at commit: a transaction can commit a message below the poll
 * cursor after the cursor moved past its id. The next message of its group, published after that
 * commit, must still not be delivered first. Found by the 35-minute chaos run (docs/reliability.md).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, batchRelay, type Envelope } from 'outboxer';
import { inFlight } from '../../src/dialects/postgres/postgres-dialect.js';
import { mariadbFixture, postgresFixture } from '../support/databases.js';
import { sleep, waitUntil } from '../support/random.js';

type PgFixture = Awaited<ReturnType<typeof postgresFixture>>;

type FirstBatchGate = ReturnType<typeof firstBatchGate>;

/** A relay's first batch waits in `enter()` until `release()`; what the relay delivers goes in `deliveries`. */
function firstBatchGate() {
  const deliveries: Envelope[] = [];
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let batches = 0;
  return {
    deliveries,
    release,
    batches: () => batches,
    /** Counts a batch and holds the first one until released; true for the first. */
    async enter(): Promise<boolean> {
      batches += 1;
      if (batches > 1) return false;
      await released;
      return true;
    },
  };
}

type ServerFixture = Awaited<ReturnType<typeof postgresFixture>> | Awaited<ReturnType<typeof mariadbFixture>>;

/** A transaction left open on a connection of its own, committed later. */
async function openTransaction(fixture: ServerFixture): Promise<{ tx: never; commit(): Promise<void> }> {
  if (fixture.kind === 'mysql') {
    const connection = await fixture.pool.getConnection();
    await connection.beginTransaction();
    return {
      tx: connection as never,
      commit: async () => {
        await connection.commit();
        connection.release();
      },
    };
  }
  const client = await fixture.pool.connect();
  await client.query('BEGIN');
  return {
    tx: client as never,
    commit: async () => {
      await client.query('COMMIT');
      client.release();
    },
  };
}

/**
 * With the first batch held by the relay (the cursor, where there is one, is past the early
 * message by then): commits the early message's transaction, publishes the next message of its
 * group, lets the relay go on, and checks that the early message went out first.
 */
async function commitThenCheckOrder(
  fixture: ServerFixture,
  run: {
    outboxer: Outboxer<unknown, boolean>;
    outbox: string;
    commit(): Promise<void>;
    early: number;
    total: number;
  },
  gate: FirstBatchGate,
): Promise<void> {
  const { outboxer, outbox, commit, early, total } = run;
  await waitUntil(() => gate.batches() === 1, 10_000, 'the first batch');
  await commit();
  const later = await (fixture.transaction as (fn: (tx: never) => Promise<number>) => Promise<number>)(
    async (tx) => outboxer.publish(tx, outbox, { n: 'later' }, { groupKey: 'g' }) as Promise<number>,
  );
  gate.release();
  await waitUntil(() => new Set(gate.deliveries.map((m) => m.id)).size === total, 10_000, 'every message');
  await outboxer.stop();
  const group = gate.deliveries.filter((m) => m.groupKey === 'g').map((m) => m.id);
  expect(group).toEqual([early, later]);
  await outboxer.close();
}

/**
 * Postgres watches the transactions its polls saw in flight (its cursor goes back when one ends);
 * MariaDB reports no snapshot, so its polls keep no cursor and read the partition from the first
 * ready row (dialects/mysql/poll.ts). Either way, the late message goes out first.
 */
describe.each([
  { name: 'postgres', make: (): Promise<ServerFixture> => postgresFixture() },
  { name: 'mariadb', make: (): Promise<ServerFixture> => mariadbFixture() },
])('a message committed late, below ids already handed out, on $name', ({ make }) => {
  let fixture: ServerFixture;
  beforeAll(async () => {
    fixture = await make();
  });
  afterAll(() => fixture.close());

  // A failure in the first batch makes its settle a transaction of its own, so the next poll is a
  // statement of its own too; without one, the next poll rides on the acknowledgement.
  test.each([
    ['polled with the acknowledgement', false],
    ['polled on its own', true],
  ])('is delivered before the later message of its group (%s)', async (_, failOne) => {
    const gate = firstBatchGate();
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: {
        late: {
          table: 'late',
          batchSize: 5,
          // No periodic restart of the cursor during the test: only the fix can bring it back.
          pollInterval: 60_000,
          relay: batchRelay(async (batch) => {
            const first = await gate.enter();
            if (first && failOne) {
              gate.deliveries.push(...batch.slice(1));
              return batch.map((_, i) => (i === 0 ? { ok: false, error: new Error('once') } : { ok: true }));
            }
            gate.deliveries.push(...batch);
          }),
        },
      },
    });
    await outboxer.migrate();

    // The early message's transaction stays open while later ids commit.
    const open = await openTransaction(fixture);
    const early = (await outboxer.publish(open.tx, 'late', { n: 'early' }, { groupKey: 'g' })) as number;
    await (fixture.transaction as (fn: (tx: never) => Promise<unknown>) => Promise<unknown>)(async (tx) =>
      outboxer.publishMany(
        tx,
        Array.from({ length: 12 }, (_, i) => ({ outbox: 'late', payload: { n: i }, groupKey: `other:${i}` })),
      ),
    );

    await outboxer.start();
    // The first batch is five of the twelve, all above the early id: the cursor is past it now.
    await commitThenCheckOrder(
      fixture,
      { outboxer, outbox: 'late', commit: open.commit, early, total: 14 },
      gate,
    );
  });
});

describe('a message committed late, below the cursor, on postgres: transactions the snapshot does not list', () => {
  let fixture: PgFixture;
  beforeAll(async () => {
    fixture = await postgresFixture();
  });
  afterAll(() => fixture.close());

  test("a transaction above the snapshot's xmax counts as in flight, and as written once it committed", async () => {
    // A snapshot that does not list the open transaction, as when nothing newer has completed:
    // its xmax is the transaction's own id. Deterministic, whatever else the server runs.
    const inFlightOn = async (xid: string): Promise<string[]> => {
      const rows = await fixture.query(
        `SELECT ${inFlight(`(SELECT '${xid}:${xid}:'::pg_snapshot AS s)`)} AS in_flight`,
      );
      return rows[0]!.in_flight as string[];
    };
    const open = await fixture.pool.connect();
    await open.query('BEGIN');
    const { rows } = await open.query('SELECT pg_current_xact_id()::text AS xid');
    const xid = rows[0].xid as string;
    expect(await inFlightOn(xid)).toContain(xid);
    await open.query('COMMIT');
    // Committed since that snapshot: invisible to it, so its rows may lie below the cursor.
    expect(await inFlightOn(xid)).toContain(xid);

    await open.query('BEGIN');
    const aborted = (await open.query('SELECT pg_current_xact_id()::text AS xid')).rows[0].xid as string;
    await open.query('ROLLBACK');
    open.release();
    expect(await inFlightOn(aborted)).not.toContain(aborted);
  });

  test('is delivered first even when its transaction id is above every completed one', async () => {
    // A snapshot lists only the transactions in flight below its xmax, one more than the newest
    // completed transaction id. Here the transaction that commits the later ids is the older one,
    // so the open transaction is newer than anything completed when the worker polls (unless
    // another transaction on the server completes meanwhile: the test above is the exact one).
    const gate = firstBatchGate();
    const outboxer = new Outboxer({
      database: fixture.database,
      leaseTimeout: 300_000, // no lease renewal (a write) while the test runs
      outboxes: {
        late_xmax: {
          table: 'late_xmax',
          batchSize: 5,
          notify: true,
          pollInterval: 60_000,
          relay: batchRelay(async (batch) => {
            await gate.enter();
            gate.deliveries.push(...batch);
          }),
        },
      },
    });
    await outboxer.migrate();
    await outboxer.start();
    await sleep(300); // the worker has polled the empty table and waits

    // `older` takes its transaction id first, and its publish makes it the transaction that will
    // NOTIFY; `open` publishes next (a newer id, no NOTIFY of its own); `older` then draws the
    // higher message ids and commits, which wakes the worker: when it polls, the newest completed
    // transaction is `older`, so its snapshot does not list `open`.
    const older = await fixture.pool.connect();
    await older.query('BEGIN');
    await outboxer.publish(older, 'late_xmax', { n: 'first' }, { groupKey: 'other:first' });
    const open = await fixture.pool.connect();
    await open.query('BEGIN');
    const early = await outboxer.publish(open, 'late_xmax', { n: 'early' }, { groupKey: 'g' });
    await outboxer.publishMany(
      older,
      Array.from({ length: 12 }, (_, i) => ({
        outbox: 'late_xmax',
        payload: { n: i },
        groupKey: `other:${i}`,
      })),
    );
    await older.query('COMMIT');
    older.release();

    await commitThenCheckOrder(
      fixture,
      {
        outboxer,
        outbox: 'late_xmax',
        commit: async () => {
          await open.query('COMMIT');
          open.release();
        },
        early,
        total: 15,
      },
      gate,
    );
  });
});
