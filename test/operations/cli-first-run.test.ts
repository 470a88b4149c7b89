/**
 * A new user's first steps with the CLI, on a fresh table of a real Postgres schema and a real
 * SQLite file: `migrate` names every table it created, `counts` before any relaying node started
 * shows an empty result instead of failing, and after a relaying node stopped cleanly it says that
 * none is running, not that none was ever seen.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay } from 'outboxer';
import {
  DATABASE_URL,
  postgresAndSqlite as fixtures,
  publishInTransaction,
  type PostgresOrSqliteFixture as Fixture,
} from '../support/databases.js';
import { cli, parse } from './cli-process.js';

const HEADER = /^OUTBOX\s+PENDING\s+DELIVERED\s+DEAD\s+ORPHANED\s+OLDEST PENDING\s+RELAY SEEN$/;

describe.each(fixtures)('outboxer CLI on a fresh $name table', ({ make }) => {
  let fixture: Fixture;
  let url: string;
  let location: string[]; // --schema for Postgres; the file is in the URL for SQLite
  let prefix: string; // how the CLI names the table: with its schema on Postgres
  let publisher: Outboxer<never, boolean>;
  const run = (args: string[]) => cli([...args, ...location], url);
  const publish = (outbox: string, payload: string) =>
    publishInTransaction(fixture, publisher, [{ outbox, payload }]);

  beforeAll(async () => {
    fixture = await make();
    if (fixture.kind === 'postgres') {
      [url, location, prefix] = [DATABASE_URL, ['--schema', fixture.schema], `${fixture.schema}.`];
    } else {
      [url, location, prefix] = [`sqlite:${fixture.db.name}`, [], ''];
    }
    publisher = new Outboxer({
      database: fixture.database,
      relay: false,
      outboxes: { orders: {}, events: {} },
    }) as Outboxer<never, boolean>;
  });
  afterAll(async () => {
    await publisher.close();
    await fixture.close();
  });

  /** The tables in the fixture's schema (or file), as the database's catalog lists them. */
  async function catalog(): Promise<string[]> {
    const rows =
      fixture.kind === 'postgres'
        ? await fixture.query(
            `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE'`,
            [fixture.schema],
          )
        : await fixture.query(
            `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`,
          );
    return rows.map((row) => String(row.name)).sort();
  }

  test('migrate names every table it created, and only those', async () => {
    const companions =
      fixture.kind === 'postgres'
        ? ['_leases', '_tallies', '_nodes', '_config']
        : ['_leases', '_nodes', '_config', '_tallies'];
    const result = await run(['migrate']);
    const listed = `${companions.slice(0, -1).join(', ')} and ${companions.at(-1)!}`;
    expect(result).toEqual({
      code: 0,
      stdout: `Migrated ${prefix}outboxer_messages (with its ${listed} tables).\n`,
      stderr: '',
    });
    const created = ['outboxer_messages', ...companions.map((c) => `outboxer_messages${c}`)];
    expect(await catalog()).toEqual([...created].sort());
    expect(parse(await run(['migrate', '--json']))).toEqual({
      migrated: true,
      table: `${prefix}outboxer_messages`,
      tables: created.map((name) => `${prefix}${name}`),
    });
  });

  test('counts right after migrate: an empty result and a hint, exit 0', async () => {
    const [table, json] = await Promise.all([run(['counts']), run(['counts', '--json'])]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout.trimEnd()).toMatch(HEADER);
    const hint = `No outbox is recorded in ${prefix}outboxer_messages_config yet: a relaying node records its outboxes when it starts. ${prefix}outboxer_messages holds no message either.\n`;
    expect(table.stderr).toBe(hint);
    expect(json).toEqual({ code: 0, stdout: '{}\n', stderr: hint });
  });

  test('messages published before any relaying node started: the hint points at --outbox', async () => {
    await publish('orders', 'o1');
    const all = await run(['counts', '--json']);
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout).toBe('{}\n');
    expect(all.stderr).toContain(`No outbox is recorded in ${prefix}outboxer_messages_config yet`);
    expect(all.stderr).toContain('pass --outbox <name>');

    const orders = await run(['counts', '--outbox', 'orders']);
    expect(orders.code, orders.stderr).toBe(0);
    expect(orders.stdout.trimEnd().split('\n')[1]).toMatch(
      /^orders\s+1\s+0\s+0\s+-\s+(now|\S.* ago)\s+never$/,
    );
    expect(orders.stderr).toBe(
      `warning: orders: 1 message is pending and no relaying node has ever started this outbox (it is not recorded in ${prefix}outboxer_messages_config): start one.\n`,
    );
  });

  test('a relaying node that stopped cleanly: counts says none is running, not that none was seen', async () => {
    const node = new Outboxer({
      database: fixture.database,
      outboxes: { events: { relay: functionRelay(async () => undefined) } },
    });
    await node.start();
    try {
      const running = parse<Record<string, { relaySeenAt: string | null; recorded: boolean }>>(
        await run(['counts', '--json']),
      );
      expect(Object.keys(running)).toEqual(['events']);
      expect(running.events!.recorded).toBe(true);
      expect(Date.now() - new Date(running.events!.relaySeenAt!).getTime()).toBeLessThan(60_000);
      expect((await run(['counts'])).stdout.trimEnd().split('\n')[1]).toMatch(/\s(now|\d+s ago)$/);
    } finally {
      await node.stop();
    }

    await publish('events', 'e1');
    const [json, table] = await Promise.all([run(['counts', '--json']), run(['counts'])]);
    expect(parse<Record<string, unknown>>(json).events).toMatchObject({
      pending: 1,
      relaySeenAt: null,
      recorded: true,
    });
    expect(table.code, table.stderr).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(HEADER);
    expect(lines[1]).toMatch(/^events\s+1\s+0\s+0\s+0\s+(now|\S.* ago)\s+not running$/);
    expect(table.stderr).toBe(
      'warning: events: 1 message is pending and no relaying node is running (the last one stopped): start one.\n',
    );
    expect(table.stderr).not.toContain('ever');
  });
});
