/**
 * A heartbeat renews the node's idle leases of an outbox and says which it renewed and which were
 * taken over meanwhile (on MySQL/MariaDB in two statements however many leases:
 * src/dialects/mysql/leases.test.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer } from 'outboxer';
import { run, type DatabaseAdapter } from '../../src/core/database.js';
import type { LeaseToken } from '../../src/core/dialect.js';
import { fixtures, publishInTransaction, type Fixture } from '../support/databases.js';

const TABLE = 'heartbeat_renewal';
const table = { schema: undefined, name: TABLE };
const OUTBOX = 'o';
const TTL = 30_000;
const CONFIGURATION = {
  partitions: 8,
  ordering: 'group',
  serializeWrites: false,
  onDead: 'continue',
} as const;

describe.each(fixtures)('heartbeat renewal on $name', ({ name, make }) => {
  let fixture: Fixture;
  let adapter: DatabaseAdapter;
  let outboxer: Outboxer<never, false>;
  /** Takes the partition for `owner`; its epoch, or undefined while another owner holds it. */
  const acquire = (owner: string, partition: number, ttl = TTL) =>
    run(
      adapter,
      adapter.dialect.acquireLease(table, { now: Date.now(), outbox: OUTBOX, partition, owner, ttl }),
    );
  const heartbeat = (renew: readonly LeaseToken[], recountEvery = 600_000) =>
    adapter.dialect.heartbeat(table, OUTBOX, 'node-a', TTL, Date.now(), {
      renew,
      checkDue: false,
      recountEvery,
    });

  beforeAll(async () => {
    fixture = await make();
    adapter = fixture.database as DatabaseAdapter;
    outboxer = new Outboxer({
      database: fixture.database,
      relay: false,
      outboxes: { [OUTBOX]: { table: TABLE, partitions: 8 } },
    } as never) as Outboxer<never, false>;
    await outboxer.migrate();
  });
  afterAll(() => fixture.close());

  test('renews the leases still held and reports the one taken over', async () => {
    const tokens: LeaseToken[] = [];
    for (const partition of [0, 1, 2, 5]) {
      // Partition 1's lease lapses at once, so node-b can take it over.
      const epoch = await acquire('node-a', partition, partition === 1 ? -1_000 : TTL);
      expect(epoch).toBeDefined();
      tokens.push({ outbox: OUTBOX, partition, owner: 'node-a', epoch: epoch! });
    }
    expect(await acquire('node-b', 1)).toBeDefined();

    const beat = await run(adapter, heartbeat(tokens));
    expect(beat.renewed).toEqual([0, 2, 5]);
    expect(beat.lost).toEqual([1]);
    // What it renewed is node-a's for another lease: node-b cannot take it.
    expect(await acquire('node-b', 2)).toBeUndefined();
    expect(await acquire('node-a', 1)).toBeUndefined();
  });

  test('a stale epoch is lost, and nothing to renew is renewed', async () => {
    const epoch = await acquire('node-a', 6);
    const stale = { outbox: OUTBOX, partition: 6, owner: 'node-a', epoch: epoch! - 1 };
    const beat = await run(adapter, heartbeat([stale]));
    expect(beat.renewed).toEqual([]);
    expect(beat.lost).toEqual([6]);
    expect((await run(adapter, heartbeat([]))).renewed).toEqual([]);
  });

  // SQLite keeps no tallies: nothing to report.
  if (name !== 'sqlite')
    test('reports whether the tallies need compacting or recounting', async () => {
      const tallies = adapter.dialect.tallies!;
      await run(adapter, tallies.compact(table, OUTBOX));
      expect((await run(adapter, heartbeat([]))).upkeep).toEqual({ compact: false, recount: false });
      // Two publishes to one partition: two tally rows where one would do.
      for (const payload of [1, 2])
        await publishInTransaction(fixture, outboxer, [{ outbox: OUTBOX, payload, groupKey: 'g' }]);
      expect((await run(adapter, heartbeat([]))).upkeep?.compact).toBe(true);
      await run(adapter, tallies.compact(table, OUTBOX));
      expect((await run(adapter, heartbeat([]))).upkeep?.compact).toBe(false);
      // Due once the outbox's configuration row (its first relay's) is older than recountEvery.
      await run(adapter, adapter.dialect.writeConfiguration(table, OUTBOX, CONFIGURATION, Date.now()));
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect((await run(adapter, heartbeat([], 1))).upkeep?.recount).toBe(true);
      expect((await run(adapter, heartbeat([], 600_000))).upkeep?.recount).toBe(false);
    });
});
