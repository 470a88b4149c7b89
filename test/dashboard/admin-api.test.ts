/**
 * The public calls the dashboard is built on, on every dialect: findMessages (filters, keyset
 * paging, the scan bound), blockedGroups by group-key prefix, blockedGroupCounts, partitions
 * (lease holder, epoch, backlog, orphans) and relayingNodes.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  Outboxer,
  functionRelay,
  type BlockedGroupsOptions,
  type Envelope,
  type OutboxOptions,
} from 'outboxer';
import { fixtures, publishInTransaction, type Fixture } from '../support/databases.js';
import { waitUntil } from '../support/random.js';

describe.each(fixtures)('administration for the dashboard on $name', ({ make }) => {
  let fixture: Fixture;
  beforeAll(async () => {
    fixture = await make();
  });
  afterAll(() => fixture.close());

  let tables = 0;
  function setup(options: OutboxOptions, instance: { relay?: boolean; testing?: 'manual' } = {}) {
    const poison = new Set<string>();
    const relay = functionRelay(async (m: Envelope) => {
      if (poison.has(String((m.payload as { p: string }).p)))
        throw new Error(`refused ${String((m.payload as { p: string }).p)}`);
    });
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { ops: { relay, table: `dash_api_${++tables}`, ...options } },
      testing: 'manual',
      logger: false,
      ...instance,
    }) as Outboxer<never, boolean>;
    const publish = (items: Array<[string, string | null, string?]>) =>
      publishInTransaction(
        fixture,
        outboxer,
        items.map(([p, groupKey, type]) => ({ outbox: 'ops', payload: { p }, groupKey, type: type ?? null })),
      );
    return { outboxer, poison, publish };
  }

  test('findMessages filters by group, type and error, pages by id and stops at the scan bound', async () => {
    const { outboxer, poison, publish } = setup({ maxAttempts: 1 });
    await outboxer.migrate();
    for (const p of ['d1', 'd2', 'd3', 'd4']) poison.add(p);
    const [d1, d2, d3, d4] = await publish([
      ['d1', 'a', 'order.created'],
      ['d2', 'a', 'order.paid'],
      ['d3', 'b', 'order.created'],
      ['d4', null, 'order.created'],
    ]);
    await outboxer.drain('ops');
    const pending = await publish([
      ['p1', 'a'],
      ['p2', 'c', 'x'],
    ]);

    const dead = await outboxer.findMessages('ops', { status: 'dead' });
    expect(dead.messages.map((m) => m.id)).toEqual([d1, d2, d3, d4]);
    expect(dead.next).toBeNull();
    expect(dead.messages[0]).toMatchObject({
      state: 'dead',
      payload: { p: 'd1' },
      lastError: 'Error: refused d1',
    });

    const ids = async (options: Parameters<typeof outboxer.findMessages>[1]) =>
      (await outboxer.findMessages('ops', options)).messages.map((m) => m.id);
    expect(await ids({ status: 'dead', groupKey: 'a' })).toEqual([d1, d2]);
    expect(await ids({ status: 'dead', type: 'order.created' })).toEqual([d1, d3, d4]);
    expect(await ids({ status: 'dead', error: 'refused d3' })).toEqual([d3]);
    expect(await ids({ status: 'dead', groupKey: 'a', type: 'order.paid' })).toEqual([d2]);
    expect(await ids({ status: 'pending' })).toEqual(pending);
    expect(await ids({ status: 'pending', groupKey: 'c', type: 'x' })).toEqual([pending[1]]);

    // Keyset paging: a full page says where to go on from.
    const first = await outboxer.findMessages('ops', { status: 'dead', limit: 3 });
    expect(first.messages.map((m) => m.id)).toEqual([d1, d2, d3]);
    expect(first.next).toBe(d3);
    const second = await outboxer.findMessages('ops', { status: 'dead', limit: 3, afterId: first.next! });
    expect(second.messages.map((m) => m.id)).toEqual([d4]);
    expect(second.next).toBeNull();

    // The scan bound: two rows examined, no match among them, a next to go on from.
    const bounded = await outboxer.findMessages('ops', { status: 'dead', groupKey: 'b', scan: 2 });
    expect(bounded).toEqual({ messages: [], next: d2 });
    expect(await ids({ status: 'dead', groupKey: 'b', scan: 2, afterId: d2! })).toEqual([d3]);

    for (const bad of [
      { status: 'all' },
      { status: 'dead', limit: 0 },
      { status: 'dead', scan: 100_001 },
      { status: 'dead', afterId: -1 },
      { status: 'dead', groupKey: '' },
      { status: 'dead', colour: 'red' },
    ]) {
      await expect(outboxer.findMessages('ops', bad as never)).rejects.toMatchObject({
        code: 'INVALID_OPTIONS',
      });
    }
    await outboxer.close();
  });

  test('blockedGroups without the waiting count: the same heads, from their index alone', async () => {
    const { outboxer, poison, publish } = setup({ maxAttempts: 5 });
    await outboxer.migrate();
    poison.add('h1');
    poison.add('k1');
    await publish([
      ['h1', 'g'],
      ['h2', 'g'],
      ['k1', 'k'],
      ['ok', 'm'],
    ]);
    await outboxer.drain('ops', { maxRounds: 1 });
    const counted = await outboxer.blockedGroups('ops');
    expect(counted.map((g) => [g.groupKey, g.waiting])).toEqual([
      ['g', 1],
      ['k', 0],
    ]);
    const heads = await outboxer.blockedGroups('ops', { waiting: false });
    expect(heads).toEqual(counted.map(({ waiting: _w, ...head }) => head));
    expect(heads[0]).not.toHaveProperty('waiting');
    expect(await outboxer.blockedGroups('ops', { waiting: false, limit: 1 })).toHaveLength(1);
    await expect(outboxer.blockedGroups('ops', { waiting: 'no' as never })).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
    });
    await outboxer.close();
  });

  test('blockedGroups by group-key prefix finds a group past the oldest heads; blockedGroupCounts counts them all', async () => {
    const { outboxer, poison, publish } = setup({ maxAttempts: 1, onDead: 'park' });
    await outboxer.migrate();
    // Parked heads a1..a4 and b1, then a retrying one (c1) after the relay is told to fail softly.
    for (const p of ['a1', 'a2', 'a3', 'a4', 'b1']) poison.add(p);
    await publish([
      ['a1', 'tenant-a/1'],
      ['a2', 'tenant-a/2'],
      ['a3', 'tenant-a/3'],
      ['a4', 'tenant-A/4'],
      ['b1', 'tenant-b/1'],
      ['n1', null],
      ['w1', 'tenant-b/1'],
    ]);
    await outboxer.drain('ops', { maxRounds: 1 });
    const keys = async (options: BlockedGroupsOptions) =>
      (await outboxer.blockedGroups('ops', { waiting: false, ...options })).map((g) => g.groupKey);
    // Beyond a limit of 1, the prefix still reaches the newest head: the database searches them all.
    expect(await keys({ limit: 1 })).toEqual(['tenant-a/1']);
    expect(await keys({ limit: 1, groupKeyPrefix: 'tenant-b' })).toEqual(['tenant-b/1']);
    expect(await keys({ groupKeyPrefix: 'tenant-a/' })).toEqual(['tenant-a/1', 'tenant-a/2', 'tenant-a/3']);
    expect(await keys({ groupKeyPrefix: 'tenant-A' })).toEqual(['tenant-A/4']); // case-sensitive
    expect(await keys({ groupKeyPrefix: 'tenant-a/2' })).toEqual(['tenant-a/2']); // a whole key
    expect(await keys({ groupKeyPrefix: 'tenant-a/2x' })).toEqual([]);
    expect(await keys({ groupKeyPrefix: '%' })).toEqual([]); // no pattern characters
    const counted = await outboxer.blockedGroups('ops', { groupKeyPrefix: 'tenant-b/' });
    expect(counted.map((g) => [g.groupKey, g.waiting, g.parked])).toEqual([['tenant-b/1', 1, true]]);
    expect(await outboxer.blockedGroupCounts('ops')).toEqual({ retrying: 0, parked: 5, exact: true });
    for (const bad of ['', 'x'.repeat(1001), 7]) {
      await expect(outboxer.blockedGroups('ops', { groupKeyPrefix: bad as never })).rejects.toMatchObject({
        code: 'INVALID_OPTIONS',
      });
    }
    await expect(outboxer.blockedGroupCounts('ops', { upTo: 0 })).rejects.toMatchObject({
      code: 'INVALID_OPTIONS',
    });
    await outboxer.close();
  });

  test('blockedGroupCounts: retrying heads of groups only, parked none without onDead park, a cap where counted', async () => {
    const { outboxer, poison, publish } = setup({ maxAttempts: 5 });
    await outboxer.migrate();
    for (const p of ['r1', 'r2', 'r3', 'u1']) poison.add(p);
    await publish([
      ['r1', 'g1'],
      ['r2', 'g2'],
      ['r3', 'g3'],
      ['u1', null],
    ]);
    await outboxer.drain('ops', { maxRounds: 1 });
    expect(await outboxer.blockedGroupCounts('ops')).toEqual({ retrying: 3, parked: 0, exact: true });
    // SQLite reads its tallies and ignores the cap; Postgres and MySQL stop counting at it.
    expect(await outboxer.blockedGroupCounts('ops', { upTo: 2 })).toEqual(
      fixture.kind === 'sqlite'
        ? { retrying: 3, parked: 0, exact: true }
        : { retrying: 2, parked: 0, exact: false },
    );
    await outboxer.close();
  });

  test('findMessages tells ready, retrying and held apart', async () => {
    const { outboxer, poison, publish } = setup({ maxAttempts: 5 });
    await outboxer.migrate();
    poison.add('h1');
    await publish([
      ['h1', 'g'],
      ['h2', 'g'],
      ['r1', null],
    ]);
    await outboxer.drain('ops', { maxRounds: 1 });
    await publish([['r2', null]]);
    const page = await outboxer.findMessages('ops', { status: 'pending' });
    const states = Object.fromEntries(page.messages.map((m) => [(m.payload as { p: string }).p, m.state]));
    // h2 is held once a poll has moved it aside; until then it is ready, behind its group's head.
    expect(states).toEqual({ h1: 'retrying', h2: expect.stringMatching(/^(ready|held)$/), r2: 'ready' });
    await outboxer.drain('ops', { maxRounds: 1 });
    expect(
      (await outboxer.findMessages('ops', { status: 'pending', groupKey: 'g' })).messages[1]?.state,
    ).toBe('held');
    await outboxer.close();
  });

  test('partitions and relayingNodes: lease holder, epoch, backlog, live nodes, orphans', async () => {
    const table = `dash_api_${++tables}`;
    const relay = functionRelay(async () => {});
    const make = (partitions: number, relaying: boolean) =>
      new Outboxer({
        database: fixture.database,
        outboxes: { ops: { relay, table, partitions } },
        relay: relaying,
        logger: false,
        leaseTimeout: 5_000,
      }) as Outboxer<never, boolean>;
    const publisher = make(4, false);
    await publisher.migrate();
    const idle = await publisher.partitions('ops');
    expect(idle.map((p) => [p.partition, p.owner, p.leased, p.backlog])).toEqual([
      [0, null, false, 0],
      [1, null, false, 0],
      [2, null, false, 0],
      [3, null, false, 0],
    ]);
    expect(await publisher.relayingNodes('ops')).toEqual([]);

    // A wider publisher writes into partitions 4 to 7, which a 4-partition relay never reads.
    const wide = make(8, false);
    await publishInTransaction(
      fixture,
      wide,
      Array.from({ length: 40 }, (_, i) => ({ outbox: 'ops', payload: i, groupKey: `k${i}` })),
    );
    const before = await publisher.partitions('ops');
    expect(before.reduce((sum, p) => sum + p.backlog, 0)).toBe(40);

    const node = make(4, true);
    await node.start();
    try {
      await waitUntil(async () => (await publisher.partitions('ops')).filter((p) => p.leased).length === 4);
      await waitUntil(async () =>
        (await publisher.partitions('ops')).every((p) => !p.leased || p.backlog === 0),
      );
      const leased = await publisher.partitions('ops');
      const nodes = await publisher.relayingNodes('ops');
      expect(nodes).toHaveLength(1);
      expect(nodes[0]).toMatchObject({ live: true, partitions: [0, 1, 2, 3] });
      expect(nodes[0]!.lastSeen).toBeInstanceOf(Date);
      for (const p of leased.filter((p) => p.partition < 4)) {
        expect(p).toMatchObject({ owner: nodes[0]!.nodeId, leased: true, orphaned: false, backlog: 0 });
        expect(p.epoch).toBeGreaterThanOrEqual(1);
        expect(p.leaseUntil!.getTime()).toBeGreaterThan(Date.now() - 60_000);
      }
      const orphans = leased.filter((p) => p.orphaned);
      expect(orphans.length).toBeGreaterThan(0);
      expect(orphans.every((p) => p.partition >= 4 && p.owner === null && p.backlog > 0)).toBe(true);
    } finally {
      await node.stop();
    }
    const released = await publisher.partitions('ops');
    expect(released.filter((p) => p.partition < 4).every((p) => !p.leased && p.owner !== null)).toBe(true);
    expect(await publisher.relayingNodes('ops')).toEqual([]);
  });
});
