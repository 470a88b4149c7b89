/**
 * The pruner, on both databases: `prune()` deletes delivered rows older than `retention.keep` in
 * batches of 10,000 until a batch comes back short, and never touches dead, pending or younger
 * delivered rows; a running instance prunes on its own every `pruneInterval`.
 */
import diagnostics from 'node:diagnostics_channel';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, PermanentError, functionRelay, type Envelope, type PublishInput } from 'outboxer';
import {
  engineFixtures,
  reportSkippedFixtures,
  publishInTransaction,
  type EngineFixture,
} from '../support/databases.js';
import { explainNodes } from '../support/plans.js';
import { waitUntil } from '../support/random.js';

/** outboxer's prune batch (not an option: `pruneAll` in src/core/outboxer.ts). */
const PRUNE_BATCH = 10_000;

describe.each(engineFixtures)('pruning on $name', ({ name, make }) => {
  let fixture: EngineFixture;
  beforeAll(async () => {
    fixture = await make();
  });
  afterAll(() => fixture.close());

  /** Publishes in transactions of at most 5,000 messages. */
  async function publish(
    outboxer: Parameters<typeof publishInTransaction>[1],
    inputs: PublishInput[],
  ): Promise<number[]> {
    const ids: number[] = [];
    for (let start = 0; start < inputs.length; start += 5_000)
      ids.push(...(await publishInTransaction(fixture, outboxer, inputs.slice(start, start + 5_000))));
    return ids;
  }

  /** Moves the delivery time of rows `ids[0]..ids[last]` two hours back, past `retention.keep`. */
  async function ageDelivered(table: string, from: number, to: number): Promise<void> {
    if (fixture.kind === 'postgres') {
      await fixture.query(
        `UPDATE "${table}" SET delivered_at = now() - interval '2 hours' WHERE id BETWEEN $1 AND $2`,
        [from, to],
      );
    } else {
      await fixture.query(`UPDATE "${table}" SET delivered_at = ? WHERE id BETWEEN ? AND ?`, [
        Date.now() - 7_200_000,
        from,
        to,
      ]);
    }
  }

  test('prune() runs in batches and removes exactly the delivered rows older than the window', async () => {
    const old = 2 * PRUNE_BATCH + 500;
    const young = 300;
    const table = `prune_batches_${name}`;
    const relay = functionRelay(async (message: Envelope) => {
      if ((message.payload as { dead?: boolean }).dead) throw new PermanentError('refused for good');
    });
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: {
        orders: { relay, table, retention: { keep: 3600 }, maxAttempts: 3, batchSize: 10_000 },
      },
      testing: 'manual',
    });
    await outboxer.migrate();
    // The dead message first, among the oldest ids; then the old rows, then the young ones.
    const [deadId] = await publishInTransaction(fixture, outboxer, [
      { outbox: 'orders', payload: { dead: true }, groupKey: 'g0' },
    ]);
    const ids = await publish(
      outboxer,
      Array.from({ length: old + young }, (_, n) => ({
        outbox: 'orders',
        payload: { n },
        groupKey: n % 10 === 0 ? null : `g${n % 97}`,
      })),
    );
    const drained = await outboxer.drain('orders');
    expect(drained.delivered).toHaveLength(old + young);
    expect(drained.dead.map((d) => d.envelope.id)).toEqual([deadId]);
    // A message still pending (published after the drain): pending rows are not the pruner's either.
    const [pendingId] = await publishInTransaction(fixture, outboxer, [
      { outbox: 'orders', payload: { n: -1 }, groupKey: 'g1' },
    ]);
    expect(await outboxer.counts('orders')).toMatchObject({
      pending: 1,
      delivered: old + young,
      dead: 1,
    });

    // Every row up to the last old one gets a delivery time past the window: the dead one too,
    // so only its status keeps it (a dead row has no delivery time of its own).
    await ageDelivered(table, deadId!, ids[old - 1]!);
    const batches: number[] = [];
    expect(await outboxer.prune('orders', { onBatch: (pruned) => batches.push(pruned) })).toBe(old);
    expect(batches).toEqual([PRUNE_BATCH, PRUNE_BATCH, 500]);

    expect(await outboxer.counts('orders')).toMatchObject({ pending: 1, delivered: young, dead: 1 });
    const left = await fixture.query(`SELECT id, status FROM "${table}" ORDER BY id`);
    expect(left.map((row) => Number(row.id))).toEqual([deadId, ...ids.slice(old), pendingId]);
    expect((await outboxer.listDead('orders')).map((m) => m.id)).toEqual([deadId]);

    // Nothing left to prune: one short batch.
    batches.length = 0;
    expect(await outboxer.prune('orders', { onBatch: (pruned) => batches.push(pruned) })).toBe(0);
    expect(batches).toEqual([0]);
    await outboxer.close();
  });

  test.skipIf(name !== 'postgres')(
    'a schema without the prune function (migrated by an older version) is SCHEMA_MISSING until migrate()',
    async () => {
      const table = `prune_unmigrated_${name}`;
      const outboxer = await keepingOutboxer(table);
      await fixture.query(`DROP FUNCTION "${table}_prune"`);
      await expect(outboxer.prune('orders')).rejects.toMatchObject({
        code: 'SCHEMA_MISSING',
        message: expect.stringMatching(new RegExp(`${table}_prune.* does not exist.*Run migrate\\(\\)`)),
      });
      await outboxer.migrate();
      expect(await outboxer.prune('orders')).toBe(0);
      await outboxer.close();
    },
  );

  /** A publish-only outbox `orders` keeping its delivered rows for an hour, migrated. */
  async function keepingOutboxer(table: string) {
    const outboxer = new Outboxer({
      database: fixture.database,
      relay: false,
      outboxes: { orders: { table, retention: { keep: 3600 } } },
    });
    await outboxer.migrate();
    return outboxer;
  }

  /** The message table's indexes, by name. */
  async function indexesOf(table: string): Promise<string[]> {
    const rows =
      fixture.kind === 'postgres'
        ? await fixture.query(`SELECT indexname AS name FROM pg_indexes WHERE tablename = $1 ORDER BY 1`, [
            table,
          ])
        : await fixture.query(
            `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? ORDER BY 1`,
            [table],
          );
    return rows.map((row) => String(row.name));
  }

  /** Where the prune statement finds its rows: the scans of the message table in its plan. */
  async function pruneScans(table: string): Promise<string[]> {
    const [statement] = fixture.database.dialect.prune(
      { schema: undefined, name: table },
      'orders',
      3600,
      100,
      Date.now(),
    );
    if (fixture.kind === 'mysql') {
      // The first statement locks the rows and keeps their ids; the others reach them by id.
      const select = statement!.text.replace(/^SET @\w+ = /, '');
      const plan = await fixture.query(`EXPLAIN ${select}`, [...statement!.values]);
      return plan.filter((row) => row.table === table).map((row) => `${String(row.type)} ${String(row.key)}`);
    }
    if (fixture.kind === 'sqlite') {
      const plan = await fixture.query(`EXPLAIN QUERY PLAN ${statement!.text}`, [...statement!.values]);
      // The scans that find rows; the delete then removes those it found, by id (`rowid=?`).
      return plan
        .map((row) => String(row.detail))
        .filter((detail) => /^(SCAN|SEARCH) /.test(detail) && !/\(rowid=\?\)$/.test(detail));
    }
    // The batch calls `<table>_prune(target, older_than_seconds, batch_size)`: its DELETE is
    // explained with the call's values in place of the function's arguments.
    const [{ source }] = await fixture.query(`SELECT prosrc AS source FROM pg_proc WHERE proname = $1`, [
      `${table}_prune`,
    ]);
    const deletion = /DELETE FROM[\s\S]*?\)\);/
      .exec(String(source))![0]
      .replace(/;$/, '')
      .replace(/\btarget\b/g, '$1')
      .replace(/\bolder_than_seconds\b/g, '$2')
      .replace(/\bbatch_size\b/g, '$3::int');
    const nodes = await explainNodes(fixture.query, deletion, statement!.values);
    // The scans that find rows; the Tid Scan then deletes those it found, by position.
    return nodes
      .filter(
        (node) =>
          node['Relation Name'] === table &&
          /Scan$/.test(node['Node Type']) &&
          node['Node Type'] !== 'Tid Scan',
      )
      .map((node) =>
        [node['Node Type'], node['Index Name'], node['Index Cond'], node.Filter && `Filter: ${node.Filter}`]
          .filter(Boolean)
          .join(' '),
      );
  }

  test('a prune reads only the rows older than the window, however many delivered rows are kept', async () => {
    const table = `prune_range_${name}`;
    const outboxer = await keepingOutboxer(table);
    // 20,000 delivered rows inside the window and none older: the steady state of an outbox that
    // keeps what it delivered. Before, each prune walked all of them to find nothing.
    if (fixture.kind === 'postgres') {
      await fixture.query(
        `INSERT INTO "${table}" (outbox, partition, payload, status, delivered_at)
         SELECT 'orders', 0, '{}', 4, now() - g * interval '1 millisecond' FROM generate_series(1, 20000) AS g`,
      );
    } else if (fixture.kind === 'mysql') {
      // MariaDB's sequence engine: seq_1_to_20000 holds the numbers 1 to 20,000.
      await fixture.query(
        `INSERT INTO "${table}" (outbox, "partition", payload, status, delivered_at, inserted_at)
         SELECT 'orders', 0, '{}', 4, ? - seq, ? FROM seq_1_to_20000`,
        [Date.now(), Date.now()],
      );
    } else {
      await fixture.query(
        `INSERT INTO "${table}" (outbox, partition, payload, status, delivered_at)
         WITH RECURSIVE g(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM g WHERE value < 20000)
         SELECT 'orders', 0, '{}', 4, ? - value FROM g`,
        [Date.now()],
      );
    }
    await fixture.query(`ANALYZE ${fixture.kind === 'mysql' ? 'TABLE ' : ''}"${table}"`);
    const scans = await pruneScans(table);
    if (fixture.kind === 'postgres') {
      expect(scans).toHaveLength(1);
      expect(scans[0]).toMatch(
        new RegExp(
          `^Index Scan ${table}_delivered_at \\(\\(outbox = 'orders'::text\\) AND \\(delivered_at < `,
        ),
      );
      expect(scans[0]).not.toMatch(/Filter/);
    } else if (fixture.kind === 'mysql') {
      expect(scans).toEqual([`range ${table}_delivered_at`]);
    } else {
      expect(scans).toEqual([
        `SEARCH ${table} USING COVERING INDEX ${table}_delivered_at (outbox=? AND delivered_at<?)`,
      ]);
    }
    expect(await outboxer.prune('orders')).toBe(0);
    const [{ kept }] = await fixture.query(`SELECT count(*) AS kept FROM "${table}"`);
    expect(Number(kept)).toBe(20_000);
    await outboxer.close();
  });

  // MySQL's tables never had the earlier index: their first version has the range's.
  test.skipIf(name === 'mariadb')(
    "migrate() replaces the earlier (outbox, id) index of delivered rows with the range's",
    async () => {
      const table = `prune_upgrade_${name}`;
      const outboxer = await keepingOutboxer(table);
      // A table migrated by an earlier version: its index of delivered rows was on (outbox, id).
      await fixture.query(`DROP INDEX "${table}_delivered_at"`);
      await fixture.query(`CREATE INDEX "${table}_delivered" ON "${table}" (outbox, id) WHERE status = 4`);
      expect(await indexesOf(table)).toContain(`${table}_delivered`);
      await outboxer.migrate();
      const indexes = await indexesOf(table);
      expect(indexes).toContain(`${table}_delivered_at`);
      expect(indexes).not.toContain(`${table}_delivered`);
      // And migrate() stays idempotent.
      await outboxer.migrate();
      expect(await indexesOf(table)).toEqual(indexes);
      await outboxer.close();
    },
  );

  test('a running instance prunes by itself every pruneInterval', async () => {
    const table = `prune_timer_${name}`;
    const delivered: number[] = [];
    const relay = functionRelay(async (message: Envelope) => {
      if ((message.payload as { dead?: boolean }).dead) throw new PermanentError('refused for good');
      delivered.push(message.id);
    });
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: {
        orders: {
          relay,
          table,
          retention: { keep: 2 },
          pruneInterval: 100,
          pollInterval: 20,
          maxAttempts: 1,
        },
      },
      // The coordinator, which runs the pruner when it is due, ticks every leaseTimeout / 3.
      leaseTimeout: 300,
    });
    const pruned: number[] = [];
    const onPrune = (event: unknown) => {
      const { outbox, pruned: count } = event as { outbox: string; pruned: number };
      if (outbox === 'orders') pruned.push(count);
    };
    diagnostics.subscribe('outboxer:prune', onPrune);
    await outboxer.migrate();
    await outboxer.start();
    try {
      const ids = await publishInTransaction(fixture, outboxer, [
        ...Array.from({ length: 20 }, (_, n) => ({
          outbox: 'orders',
          payload: { n },
          groupKey: `g${n % 3}`,
        })),
        { outbox: 'orders', payload: { dead: true }, groupKey: 'g0' },
      ]);
      // Acknowledged (the relay returns before its batch is written, so wait for the table).
      await waitUntil(
        async () => delivered.length === 20 && (await outboxer.counts('orders')).pending === 0,
        10_000,
        'every message delivered and acknowledged',
      );
      // Delivered rows are kept for two seconds first (the pruner runs meanwhile and leaves them)...
      expect((await outboxer.counts('orders')).delivered).toBeGreaterThan(0);
      // ...then the pruner removes them, without any call to prune().
      await waitUntil(
        async () => (await outboxer.counts('orders')).delivered === 0,
        10_000,
        'the pruner to remove the delivered rows',
      );
      expect(await outboxer.counts('orders')).toMatchObject({ pending: 0, delivered: 0, dead: 1 });
      expect((await outboxer.listDead('orders')).map((m) => m.id)).toEqual([ids[20]]);
      expect(pruned.reduce((a, b) => a + b, 0)).toBe(20);
      // It ran repeatedly, every pruneInterval, most runs finding nothing yet.
      expect(pruned.length).toBeGreaterThan(3);
    } finally {
      diagnostics.unsubscribe('outboxer:prune', onPrune);
      await outboxer.stop();
    }
  });
});

reportSkippedFixtures('pruning');
