/**
 * MySQL: the engine's transactions of different nodes do not deadlock each other. Each test runs
 * the statements of two nodes' transactions in lockstep on two connections (statement i of both,
 * concurrently, then statement i + 1), as the adapter runs them (READ COMMITTED), the interleaving
 * that InnoDB's locks turn into a deadlock when a statement waits for a row the other transaction
 * locked earlier. docs/reliability.md, finding 12.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { PoolConnection } from 'mysql2/promise';
import { Outboxer, type SqlQuery } from 'outboxer';
import { mysqlDialect } from 'outboxer/mysql2';
import { runAtomically } from '../../src/core/database.js';
import { queriesOf } from '../../src/core/sql.js';
import { mariadbFixture, publishInTransaction } from '../support/databases.js';
import { waitUntil } from '../support/random.js';

type MariadbFixture = Awaited<ReturnType<typeof mariadbFixture>>;

const table = { schema: undefined, name: 'locking' };
const outbox = 'locking';
const TTL = 30_000;

describe('MySQL transactions of two nodes at once', () => {
  let fixture: MariadbFixture;
  beforeAll(async () => {
    fixture = await mariadbFixture();
    await new Outboxer({
      database: fixture.database,
      relay: false,
      outboxes: { [outbox]: { table: 'locking' } },
    }).migrate();
  });
  afterAll(() => fixture.close());

  /** Runs each transaction's statements in lockstep, one connection each; commits them all. */
  async function lockstep(transactions: ReadonlyArray<readonly SqlQuery[]>): Promise<void> {
    const connections: PoolConnection[] = [];
    for (const _ of transactions) connections.push(await fixture.pool.getConnection());
    try {
      for (const connection of connections) {
        await connection.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
        await connection.beginTransaction();
      }
      const steps = Math.max(...transactions.map((t) => t.length));
      for (let i = 0; i < steps; i += 1) {
        await Promise.all(
          transactions.map((statements, k) => {
            const query = statements[i];
            return query === undefined ? undefined : connections[k]!.query(query.text, [...query.values]);
          }),
        );
      }
      for (const connection of connections) await connection.commit();
    } finally {
      for (const connection of connections) {
        await connection.rollback().catch(() => undefined);
        connection.release();
      }
    }
  }

  const heartbeat = (node: string) => queriesOf(mysqlDialect.heartbeat(table, outbox, node, TTL));
  const publisher = () =>
    new Outboxer({
      database: fixture.database,
      relay: false,
      outboxes: { [outbox]: { table: 'locking' } },
    }) as Outboxer<never, boolean>;

  test('heartbeats of two nodes at once both commit (no deadlock on the nodes table)', async () => {
    // Each node has beaten before: both rows exist, as in every heartbeat after the first.
    await lockstep([heartbeat('node-a')]);
    await lockstep([heartbeat('node-b')]);
    await expect(lockstep([heartbeat('node-a'), heartbeat('node-b')])).resolves.toBeUndefined();
    const rows = await fixture.query(`SELECT node_id FROM "locking_nodes" ORDER BY node_id`);
    expect(rows.map((r) => r.node_id)).toEqual(['node-a', 'node-b']);
  });

  // docs/reliability.md, finding 16: a worker paused past its lease wakes up and settles the batch
  // that the partition's new owner is settling too. Its settle locked those rows, then waited for
  // the lease row the owner's settle held, while the owner's waited for the rows: InnoDB rolled
  // one of them back, often the owner's.
  test("a paused worker's settle and the new owner's settle of the same rows both commit (no deadlock)", async () => {
    const [id] = await publishInTransaction(fixture, publisher(), [{ outbox, payload: 'x', groupKey: 'g' }]);
    const acquire = (owner: string, ttl: number) =>
      runAtomically(
        fixture.database,
        mysqlDialect.acquireLease(table, { outbox, partition: 0, owner, ttl, now: Date.now() }),
      );
    const paused = { outbox, partition: 0, owner: 'paused', epoch: (await acquire('paused', 1))! };
    let epoch: number | undefined;
    await waitUntil(async () => (epoch = await acquire('owner', TTL)) !== undefined);
    const settle = (lease: typeof paused) =>
      queriesOf(
        mysqlDialect.settle(table, {
          lease,
          now: Date.now(),
          delivered: [id!],
          failed: [],
          unblockedGroups: [],
          keep: false,
          ttl: TTL,
          parkDead: false,
        }),
      );
    const owner = await fixture.pool.getConnection();
    const zombie = await fixture.pool.getConnection();
    let settling: Promise<void> | undefined;
    try {
      for (const connection of [owner, zombie]) {
        await connection.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
        await connection.beginTransaction();
      }
      const [ownerId] = (await owner.query('SELECT CONNECTION_ID() AS id'))[0] as Array<{ id: number }>;
      const waiting = async (threadId: number) => {
        const [rows] = await fixture.pool.query(
          `SELECT trx_state FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ?`,
          [threadId],
        );
        return (rows as Array<{ trx_state: string }>)[0]?.trx_state === 'LOCK WAIT';
      };
      // The paused worker's settle, woken up, gets as far as locking the rows it settles.
      const stale = settle(paused);
      const locked = stale.findIndex((q) => /^SELECT (?:m\.)?id FROM .* FOR UPDATE$/s.test(q.text));
      expect(locked, 'the settle statement that locks the settled rows').toBeGreaterThanOrEqual(0);
      for (const query of stale.slice(0, locked + 1)) await zombie.query(query.text, [...query.values]);
      // The owner's settle of the same rows starts, and waits for a lock.
      settling = (async () => {
        for (const query of settle({ ...paused, owner: 'owner', epoch: epoch! }))
          await owner.query(query.text, [...query.values]);
        await owner.commit();
      })();
      await waitUntil(() => waiting(ownerId!.id));
      // The paused worker's settle goes on (every statement fenced: it changes nothing) and ends.
      for (const query of stale.slice(locked + 1)) await zombie.query(query.text, [...query.values]);
      await zombie.commit();
      await settling;
      expect(await fixture.query(`SELECT id FROM "locking" WHERE id = ?`, [id])).toEqual([]);
    } finally {
      await zombie.rollback().catch(() => undefined);
      await settling?.catch(() => undefined);
      for (const connection of [zombie, owner]) {
        await connection.rollback().catch(() => undefined);
        connection.release();
      }
    }
  });

  test('a node silent for ten lease periods is still forgotten by a heartbeat', async () => {
    await fixture.query(`UPDATE "locking_nodes" SET last_seen = 0 WHERE node_id = 'node-b'`);
    await lockstep([heartbeat('node-a')]);
    const rows = await fixture.query(`SELECT node_id FROM "locking_nodes" ORDER BY node_id`);
    expect(rows.map((r) => r.node_id)).toEqual(['node-a']);
  });
});
