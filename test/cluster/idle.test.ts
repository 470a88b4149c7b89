/**
 * An idle relaying node with `notify`: its workers sleep until a notification (no `pollInterval`
 * polling), its heartbeat renews every lease of the outbox and is the only statement it sends,
 * and nothing is stranded meanwhile: a publish wakes the worker, a message whose notification was
 * never sent is found by the heartbeat, one published while the listener was cut is found when it
 * reconnects, and a partition handed back by `stop()` is taken by the other node at once (the
 * rebalance notification), long before its coordinator's next tick. Without `notify` (SQLite, and
 * Postgres with it off), what the relaying instance publishes itself wakes its own workers.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay, type Envelope, type Logger, type OutboxOptions } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import type { DatabaseAdapter } from '../../src/core/database.js';
import { counting, untilQuiet } from '../support/counting.js';
import { DATABASE_URL, postgresFixture, publishInTransaction, sqliteFixture } from '../support/databases.js';
import { sleep, waitUntil } from '../support/random.js';
import { tcpProxy } from '../support/tcp-proxy.js';

type Fixture = Awaited<ReturnType<typeof postgresFixture>>;

let fixture: Fixture;
beforeAll(async () => {
  fixture = await postgresFixture(20);
});
afterAll(() => fixture.close());

let tables = 0;
const newTable = () => `idle_${++tables}`;

// A lease of a minute: the heartbeat (and its check for work due) comes every 20 s, after every
// wait below has ended, so what these tests see comes from notifications. The instance is named
// after this file's schema: NOTIFY payloads and the notify locks are keyed by instance name,
// outbox and partition, so other test files' publishers to an outbox `events` of an instance
// `outboxer` (the default), running at the same time in the same database, would otherwise keep
// these workers polling.
function relaying(
  table: string,
  database: DatabaseAdapter,
  options: Partial<OutboxOptions> & Pick<OutboxOptions, 'relay'>,
  extra: Record<string, unknown> = {},
) {
  return new Outboxer({
    name: `idle-${fixture.schema}`,
    database,
    outboxes: { events: { table, partitions: 4, pollInterval: 60_000, notify: true, ...options } },
    leaseTimeout: 60_000,
    ...extra,
  } as never) as Outboxer<never, false>;
}

describe('an idle node with notify', () => {
  test('sends nothing between heartbeats, and a message published while every worker sleeps is delivered', async () => {
    const table = newTable();
    const { adapter, counter } = counting(fixture.database);
    const received: number[] = [];
    const node = relaying(table, adapter, {
      relay: functionRelay(async (m: Envelope) => void received.push(m.id)),
    });
    try {
      await node.migrate();
      await node.start();
      await untilQuiet(counter);
      const before = counter.statements;
      await sleep(1000);
      expect(counter.statements).toBe(before);
      const ids = await publishInTransaction(
        fixture,
        node,
        Array.from({ length: 8 }, (_, i) => ({ outbox: 'events', payload: i, groupKey: `g${i}` })),
      );
      await waitUntil(() => ids.every((id) => received.includes(id)), 5000, 'the woken workers');
    } finally {
      await node.stop();
    }
  });

  test('a worker asleep until a notification wakes for a retry falling due, read with its empty poll', async () => {
    const table = newTable();
    const { adapter } = counting(fixture.database);
    const nextRetryReads: string[] = [];
    const watching: DatabaseAdapter = {
      ...adapter,
      execute: (query) => {
        if (/AS next_attempt_at, now\(\) AS now/.test(query.text)) nextRetryReads.push(query.text);
        return adapter.execute(query);
      },
    };
    const attempts: number[] = [];
    const node = relaying(table, watching, {
      partitions: 1,
      backoff: { min: 500, max: 500 },
      relay: functionRelay(async (m: Envelope) => {
        attempts.push(m.attempts);
        if (m.attempts === 0) throw new Error('not yet');
      }),
    });
    try {
      await node.migrate();
      await node.start();
      await publishInTransaction(fixture, node, [{ outbox: 'events', payload: 1, groupKey: 'g' }]);
      // No heartbeat for 20 s, no poll for a minute, no notification for the retry: only the
      // worker's own timer, set from the retry time its empty poll read, delivers it again.
      await waitUntil(() => attempts.length === 2, 15_000, 'the retry');
      expect(attempts).toEqual([0, 1]);
      expect(nextRetryReads, 'Postgres reads the next retry with the empty poll').toEqual([]);
    } finally {
      await node.stop();
    }
  });

  test('a message whose notification was never sent is found by the heartbeat', async () => {
    const table = newTable();
    const received: number[] = [];
    // Heartbeats every 200 ms; no poll on pollInterval for a minute.
    const node = relaying(
      table,
      fixture.database,
      { relay: functionRelay(async (m: Envelope) => void received.push(m.id)) },
      { leaseTimeout: 600 },
    );
    const silent = new Outboxer({
      database: fixture.database,
      outboxes: { events: { table, partitions: 4 } },
      relay: false,
    } as never) as Outboxer<never, false>;
    try {
      await node.migrate();
      await node.start();
      await sleep(300);
      const ids = await publishInTransaction(fixture, silent, [
        { outbox: 'events', payload: 1, groupKey: 'g' },
      ]);
      await waitUntil(() => received.includes(ids[0]!), 10_000, 'the heartbeat to find the message');
    } finally {
      await node.stop();
    }
  });

  test('a message published while the listener was cut is delivered once it reconnects', async () => {
    const table = newTable();
    const proxy = await tcpProxy(Number(new URL(DATABASE_URL).port || 5432));
    const url = new URL(DATABASE_URL);
    url.hostname = '127.0.0.1';
    url.port = String(proxy.port);
    const database = nodePostgres(fixture.pool, {
      listenClient: () =>
        new pg.Client({
          connectionString: url.toString(),
          application_name: `${fixture.schema}:idle-listener`,
        }),
    }) as DatabaseAdapter;
    const warnings: string[] = [];
    const logger: Logger = {
      debug: () => undefined,
      info: () => undefined,
      warn: (message: string) => void warnings.push(message),
      error: () => undefined,
    };
    const received: number[] = [];
    const node = relaying(
      table,
      database,
      { relay: functionRelay(async (m: Envelope) => void received.push(m.id)) },
      { logger },
    );
    try {
      await node.migrate();
      await node.start();
      await sleep(300);
      await proxy.cut();
      await waitUntil(
        () => warnings.some((w) => w.includes('listener disconnected')),
        5000,
        'the lost listener',
      );
      await sleep(300); // the workers woken by the loss have polled, and sleep for pollInterval (a minute)
      const ids = await publishInTransaction(fixture, node, [
        { outbox: 'events', payload: 1, groupKey: 'g' },
      ]);
      await proxy.restore();
      await waitUntil(() => received.includes(ids[0]!), 5000, 'the message, after the reconnect');
    } finally {
      await node.stop();
      await proxy.cut();
    }
  });
});

describe('hand-over with notify', () => {
  test('a joining node gets its share, and the partitions stop() hands back are taken by the other node', async () => {
    const table = newTable();
    const owners = async () =>
      (await fixture.query(
        `SELECT owner, count(*)::int AS n FROM ${table}_leases WHERE lease_until > now() GROUP BY owner ORDER BY owner`,
      )) as Array<{ owner: string; n: number }>;
    const relay = functionRelay(async () => undefined);
    const a = relaying(table, fixture.database, { relay }, { nodeId: 'node-a' });
    const b = relaying(table, fixture.database, { relay }, { nodeId: 'node-b' });
    try {
      await a.migrate();
      await a.start();
      await waitUntil(async () => (await owners()).length === 1, 5000, 'node a to hold every partition');
      await b.start();
      await waitUntil(
        async () =>
          JSON.stringify(await owners()) ===
          JSON.stringify([
            { owner: 'node-a', n: 2 },
            { owner: 'node-b', n: 2 },
          ]),
        5000,
        'two partitions each, without waiting for a tick',
      );
      await a.stop();
      await waitUntil(
        async () => JSON.stringify(await owners()) === JSON.stringify([{ owner: 'node-b', n: 4 }]),
        5000,
        'node b to take what node a handed back',
      );
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });
});

describe('Postgres, notify off', () => {
  test('a message the relaying instance publishes while every worker sleeps for pollInterval is delivered: the in-process wake-up', async () => {
    const { adapter, counter } = counting(fixture.database);
    const received: number[] = [];
    const node = relaying(newTable(), adapter, {
      notify: false,
      relay: functionRelay(async (m: Envelope) => void received.push(m.id)),
    });
    try {
      await node.migrate();
      await node.start();
      await untilQuiet(counter); // every worker polled once, and sleeps for a minute
      const ids = await publishInTransaction(
        fixture,
        node,
        Array.from({ length: 8 }, (_, i) => ({ outbox: 'events', payload: i, groupKey: `g${i}` })),
      );
      await waitUntil(() => ids.every((id) => received.includes(id)), 5000, 'the woken workers');
    } finally {
      await node.stop();
    }
  });
});

describe('SQLite, without notifications', () => {
  test('a message published while every worker sleeps for pollInterval is delivered: the in-process wake-up', async () => {
    const sqlite = sqliteFixture();
    const received: number[] = [];
    const node = new Outboxer({
      database: sqlite.database,
      outboxes: {
        events: {
          partitions: 4,
          pollInterval: 60_000,
          relay: functionRelay(async (m: Envelope) => void received.push(m.id)),
        },
      },
    } as never) as Outboxer<never, false>;
    try {
      await node.migrate();
      await node.start();
      await sleep(300); // every worker polled once, and sleeps for a minute
      const ids = await publishInTransaction(
        sqlite,
        node,
        Array.from({ length: 4 }, (_, i) => ({ outbox: 'events', payload: i, groupKey: `g${i}` })),
      );
      await waitUntil(() => ids.every((id) => received.includes(id)), 5000, 'the woken workers');
    } finally {
      await node.stop();
      await sqlite.close();
    }
  });
});
