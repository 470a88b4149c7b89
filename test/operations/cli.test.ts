/**
 * `npx outboxer …` as a child process (node --import tsx src/cli/index.ts) against a real Postgres
 * and a real SQLite file: every command, --json, the confirmation prompt on a real terminal
 * (script(1) gives the child a pseudo-terminal) and batches with progress. The first steps on a
 * fresh table are in cli-first-run.test.ts, bad URLs and command lines in cli-usage.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay, type Envelope, type OutboxOptions } from 'outboxer';
import {
  DATABASE_URL,
  postgresAndSqlite as fixtures,
  publishInTransaction,
  type PostgresOrSqliteFixture as Fixture,
} from '../support/databases.js';
import { cli, cliOnTerminal, parse } from './cli-process.js';

describe.each(fixtures)('outboxer CLI on $name', ({ make }) => {
  let fixture: Fixture;
  let url: string;
  let location: string[]; // --schema for Postgres; the file is in the URL for SQLite
  const poison = new Set<string>();
  const delivered: Array<{ outbox: string; id: number }> = [];
  const relay = functionRelay(async (m: Envelope) => {
    if (poison.has(String(m.payload))) throw new Error(`refused ${String(m.payload)}`);
    delivered.push({ outbox: m.outbox, id: m.id });
  });
  const recorded: Record<string, OutboxOptions> = {
    orders: { relay, partitions: 2, maxAttempts: 2, onDead: 'park' },
    audit: { relay },
  };
  let outboxer: Outboxer<never, boolean>;
  const run = (args: string[]) => cli([...args, ...location], url);
  const publish = (outbox: string, items: Array<[string, string | null]>) =>
    publishInTransaction(
      fixture,
      outboxer,
      items.map(([payload, groupKey]) => ({ outbox, payload, groupKey })),
    );
  const ids = { o1: 0, o2: 0, o3: 0, a1: 0, a2: 0 };

  beforeAll(async () => {
    fixture = await make();
    if (fixture.kind === 'postgres') {
      url = DATABASE_URL;
      location = ['--schema', fixture.schema];
    } else {
      url = `sqlite:${fixture.db.name}`;
      location = [];
    }
    outboxer = new Outboxer({
      database: fixture.database,
      testing: 'manual',
      outboxes: {
        ...recorded,
        bulk: { relay, maxAttempts: 1, batchSize: 1000 },
        kept: { relay, retention: { keep: 0 } },
      },
    }) as Outboxer<never, boolean>;
  });
  afterAll(async () => {
    await outboxer.close();
    await fixture.close();
  });

  test('migrate creates the tables; a relaying node records its outboxes in <table>_config', async () => {
    const result = await run(['migrate']);
    expect(result).toMatchObject({
      code: 0,
      stdout:
        'Migrated ' +
        (fixture.kind === 'postgres' ? `${fixture.schema}.` : '') +
        'outboxer_messages (with its ' +
        (fixture.kind === 'postgres'
          ? '_leases, _tallies, _nodes and _config'
          : '_leases, _nodes, _config and _tallies') +
        ' tables).\n',
    });
    expect(parse(await run(['migrate', '--json']))).toMatchObject({ migrated: true });

    const recorder = new Outboxer({ database: fixture.database, outboxes: recorded });
    await recorder.start();
    await recorder.stop();

    // orders: o1 fails twice, goes dead and parks order:1 (o2 waits); o3 is delivered.
    // audit: a1 keeps failing and holds a2 behind it.
    poison.add('o1').add('a1');
    [ids.o1, ids.o2, ids.o3] = (await publish('orders', [
      ['o1', 'order:1'],
      ['o2', 'order:1'],
      ['o3', 'order:2'],
    ])) as [number, number, number];
    [ids.a1, ids.a2] = (await publish('audit', [
      ['a1', 'user:7'],
      ['a2', 'user:7'],
    ])) as [number, number];
    await outboxer.drain('orders');
    await outboxer.drain('audit', { maxRounds: 2 });
  });

  test('counts: every recorded outbox, as a table and as JSON', async () => {
    const [json, table, single] = await Promise.all([
      run(['counts', '--json']),
      run(['counts']),
      run(['counts', '--outbox', 'orders', '--json']),
    ]);
    const counts = parse<Record<string, Record<string, unknown>>>(json);
    expect(Object.keys(counts)).toEqual(['audit', 'orders']);
    expect(counts.orders).toMatchObject({
      pending: 1,
      delivered: 0,
      dead: 1,
      orphaned: 0,
      relaySeenAt: null, // the relaying node stopped cleanly, which removed its row
      recorded: true,
    });
    expect(counts.audit).toMatchObject({ pending: 2, delivered: 0, dead: 0, orphaned: 0 });
    expect(new Date(counts.audit!.oldestPendingAt as string).getTime()).toBeLessThanOrEqual(Date.now());

    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      /^OUTBOX\s+PENDING\s+DELIVERED\s+DEAD\s+ORPHANED\s+OLDEST PENDING\s+RELAY SEEN$/,
    );
    // Under a second old reads "now"; older, "<n>s ago" (a fast machine gets here within the second).
    expect(lines[1]).toMatch(/^audit\s+2\s+0\s+0\s+0\s+(now|\S.* ago)\s+not running$/);
    expect(lines[2]).toMatch(/^orders\s+1\s+0\s+1\s+0\s+/);
    // The relaying node stopped: the backlog has nobody to deliver it.
    expect(table.stderr).toContain(
      'warning: audit: 2 messages are pending and no relaying node is running (the last one stopped): start one.',
    );

    const one = parse<Record<string, unknown>>(single);
    expect(Object.keys(one)).toEqual(['orders']);
  });

  test('counts --up-to: each figure counted up to n, shown as "n+" when it stopped there', async () => {
    const [json, table] = await Promise.all([
      run(['counts', '--outbox', 'audit', '--up-to', '1', '--json']),
      run(['counts', '--outbox', 'audit', '--up-to', '1']),
    ]);
    expect(parse<Record<string, Record<string, unknown>>>(json).audit).toMatchObject({
      pending: 1,
      dead: 0,
      exact: false,
    });
    expect(table.stdout.trimEnd().split('\n')[1]).toMatch(/^audit\s+1\+\s+0\s+0\s+/);
  });

  test('pending: oldest first, with attempts and the last error', async () => {
    const [json, table, ambiguous] = await Promise.all([
      run(['pending', '--outbox', 'audit', '--json']),
      run(['pending', '--outbox', 'audit', '--limit', '1']),
      run(['pending']),
    ]);
    const pending = parse<Array<Record<string, unknown>>>(json);
    expect(pending.map((m) => [m.id, m.groupKey, m.attempts, m.payload])).toEqual([
      [ids.a1, 'user:7', 2, 'a1'],
      [ids.a2, 'user:7', 0, 'a2'],
    ]);
    expect(pending[0]!.lastError).toBe('Error: refused a1');

    expect(table.stdout).toMatch(
      /^\s*ID\s+GROUP\s+TYPE\s+PART\s+ATTEMPTS\s+PUBLISHED\s+NEXT ATTEMPT\s+LAST ERROR\n/,
    );
    expect(table.stdout).toContain('Error: refused a1');
    expect(table.stdout).not.toContain(String(ids.a2) + ' ');
    expect(table.stderr).toContain('(the first 1; pass --limit for more)');

    expect(ambiguous.code).toBe(2);
    expect(ambiguous.stderr).toContain('holds several outboxes (audit, orders): pass --outbox <name>');
  });

  test('blocked: the retrying head of a group, and a parked one (found automatically)', async () => {
    const [auditJson, ordersJson, continueJson, table] = await Promise.all([
      run(['blocked', '--outbox', 'audit', '--json']),
      run(['blocked', '--outbox', 'orders', '--json']),
      run(['blocked', '--outbox', 'orders', '--on-dead', 'continue', '--json']),
      run(['blocked', '--outbox', 'orders']),
    ]);
    const audit = parse<Array<Record<string, unknown>>>(auditJson);
    expect(audit).toMatchObject([
      { groupKey: 'user:7', headId: ids.a1, parked: false, attempts: 2, waiting: 1 },
    ]);

    const orders = parse<Array<Record<string, unknown>>>(ordersJson);
    expect(orders).toMatchObject([
      { groupKey: 'order:1', headId: ids.o1, parked: true, waiting: 1, nextAttemptAt: null },
    ]);
    // Told the outbox does not park, it shows retrying heads only.
    expect(parse(continueJson)).toEqual([]);

    expect(table.stdout).toMatch(
      /^GROUP\s+HEAD\s+STATE\s+ATTEMPTS\s+FAILING SINCE\s+NEXT ATTEMPT\s+WAITING\s+LAST ERROR\n/,
    );
    expect(table.stdout).toMatch(
      new RegExp(`order:1\\s+${ids.o1}\\s+parked\\s+2\\s+(now|.* ago)\\s+-\\s+1\\s+Error: refused o1`),
    );
  });

  test('dead: the dead messages', async () => {
    const dead = parse<Array<Record<string, unknown>>>(await run(['dead', '--outbox', 'orders', '--json']));
    expect(dead.map((m) => [m.id, m.attempts, m.lastError])).toEqual([[ids.o1, 2, 'Error: refused o1']]);
    expect((await run(['dead', '--outbox', 'audit'])).stdout).toBe('No dead messages in outbox audit.\n');
  });

  test('discard on a parking outbox leaves parked groups parked (--on-dead auto finds park)', async () => {
    poison.add('o4');
    const [o4, o5] = await publish('orders', [
      ['o4', 'order:3'],
      ['o5', 'order:3'],
    ]);
    await outboxer.drain('orders', { maxRounds: 1 }); // o4 failed once, o5 waits behind it
    expect(parse(await run(['discard', String(o4), '--outbox', 'orders', '--yes', '--json']))).toEqual({
      outbox: 'orders',
      discarded: 1,
    });
    delivered.length = 0;
    await outboxer.drain('orders');
    // order:3 moved on; order:1 still waits behind its dead head (o2 was not released).
    expect(delivered.map((d) => d.id)).toEqual([o5]);
    expect(await outboxer.blockedGroups('orders')).toMatchObject([
      { groupKey: 'order:1', headId: ids.o1, parked: true, waiting: 1 },
    ]);
  });

  test('retry-dead asks first: refused without a terminal, declined with "n", done with "y"', async () => {
    const refused = await run(['retry-dead', '--outbox', 'orders']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('stdin is not a terminal: pass --yes');

    const declined = await cliOnTerminal(['retry-dead', '--outbox', 'orders', ...location], url, 'n');
    expect(declined.screen).toContain('Make the 1 dead message of outbox orders pending again?');
    expect(declined.screen).toContain('Nothing was changed.');
    expect(declined.code).toBe(1);
    expect((await outboxer.counts('orders')).dead).toBe(1);

    const accepted = await cliOnTerminal(['retry-dead', '--outbox', 'orders', ...location], url, 'y');
    expect(accepted.screen).toContain('Revived 1 dead message of outbox orders');
    expect(accepted.code).toBe(0);

    // Parked: the group is redelivered in its order once the cause is fixed.
    poison.clear();
    delivered.length = 0;
    await outboxer.drain('orders');
    expect(delivered.map((d) => d.id)).toEqual([ids.o1, ids.o2]);
    expect(await outboxer.counts('orders')).toMatchObject({ pending: 0, dead: 0 });
  });

  test('discard: the head of a blocked group goes, and the group moves on', async () => {
    const result = parse(await run(['discard', String(ids.a1), '--outbox', 'audit', '--yes', '--json']));
    expect(result).toEqual({ outbox: 'audit', discarded: 1 });
    expect(await outboxer.blockedGroups('audit')).toEqual([]);
    delivered.length = 0;
    await outboxer.drain('audit');
    expect(delivered.map((d) => d.id)).toEqual([ids.a2]);

    const nothing = await run(['discard', '--outbox', 'audit']);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toContain('discard needs message ids');
  });

  test('retry-dead and discard --dead page through thousands of dead messages, with progress', async () => {
    poison.clear();
    const payloads = Array.from({ length: 2500 }, (_, i) => `bulk-${i}`);
    for (const p of payloads) poison.add(p);
    await publish(
      'bulk',
      payloads.map((p) => [p, null]),
    );
    await outboxer.drain('bulk');
    expect((await outboxer.counts('bulk')).dead).toBe(2500);

    const retried = await run(['retry-dead', '--outbox', 'bulk', '--yes']);
    expect(retried.code, retried.stderr).toBe(0);
    expect(retried.stderr).toContain('revived 1,000 of 2,500 (40%)\n');
    expect(retried.stderr).toContain('revived 2,500 of 2,500 (100%)\n');
    expect(retried.stdout).toMatch(/^Revived 2,500 dead messages of outbox bulk in /);
    expect(await outboxer.counts('bulk')).toMatchObject({ pending: 2500, dead: 0 });

    await outboxer.drain('bulk');
    // Not recorded in <table>_config (never started by a relaying node): partitions unknown.
    const counts = parse<Record<string, Record<string, unknown>>>(
      await run(['counts', '--outbox', 'bulk', '--json']),
    );
    expect(counts.bulk).toMatchObject({ pending: 0, dead: 2500, orphaned: null, recorded: false });

    const discarded = await run(['discard', '--dead', '--outbox', 'bulk', '--yes', '--json']);
    expect(JSON.parse(discarded.stdout)).toEqual({ outbox: 'bulk', discarded: 2500 });
    expect(discarded.stderr).toContain('discarded 1,000 of 2,500 (40%)\n');
    expect(await outboxer.counts('bulk')).toMatchObject({ pending: 0, dead: 0 });
    // Neither recorded nor holding a message: indistinguishable from a typo.
    const gone = await run(['counts', '--outbox', 'bulk']);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('Unknown outbox "bulk"');
  });

  test('prune deletes delivered messages past --older-than', async () => {
    await publish('kept', [
      ['k1', null],
      ['k2', null],
      ['k3', null],
    ]);
    await outboxer.drain('kept');
    expect((await outboxer.counts('kept')).delivered).toBe(3);

    const missing = await run(['prune', '--outbox', 'kept', '--yes']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('prune needs --older-than');

    expect(parse(await run(['prune', '--outbox', 'kept', '--older-than', '1h', '--yes', '--json']))).toEqual({
      outbox: 'kept',
      pruned: 0,
    });
    const pruned = await run(['prune', '--outbox', 'kept', '--older-than', '0', '--yes']);
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(pruned.stdout).toMatch(/^Pruned 3 delivered messages of outbox kept in /);
    expect(pruned.stderr).toContain('pruned 3\n');
    expect((await outboxer.counts('kept')).delivered).toBe(0);
  });

  test('errors: an unknown outbox, a missing table', async () => {
    const unknown = await run(['counts', '--outbox', 'ordres']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('Unknown outbox "ordres"');
    expect(unknown.stderr).toContain('Recorded outboxes: audit, orders.');
    expect(unknown.stdout).toBe('');

    const table = await run(['counts', '--table', 'no_such_table']);
    expect(table.code).toBe(1);
    expect(table.stderr).toContain('Run outboxer migrate, or check --table and --schema');
  });
});
