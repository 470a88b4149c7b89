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
import { queriesOf } from '../../src/core/sql.js';
import { mariadbFixture } from '../support/databases.js';

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

  test('heartbeats of two nodes at once both commit (no deadlock on the nodes table)', async () => {
    // Each node has beaten before: both rows exist, as in every heartbeat after the first.
    await lockstep([heartbeat('node-a')]);
    await lockstep([heartbeat('node-b')]);
    await expect(lockstep([heartbeat('node-a'), heartbeat('node-b')])).resolves.toBeUndefined();
    const rows = await fixture.query(`SELECT node_id FROM "locking_nodes" ORDER BY node_id`);
    expect(rows.map((r) => r.node_id)).toEqual(['node-a', 'node-b']);
  });

  test('a node silent for ten lease periods is still forgotten by a heartbeat', async () => {
    await fixture.query(`UPDATE "locking_nodes" SET last_seen = 0 WHERE node_id = 'node-b'`);
    await lockstep([heartbeat('node-a')]);
    const rows = await fixture.query(`SELECT node_id FROM "locking_nodes" ORDER BY node_id`);
    expect(rows.map((r) => r.node_id)).toEqual(['node-a']);
  });
});
