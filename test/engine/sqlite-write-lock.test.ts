/**
 * On SQLite no write transaction stays open while the destination is called: that would stall
 * every writer of the application (SQLite has one writer at a time). While a `functionRelay`
 * delivers, a second connection to the same file, with a busy timeout of 0, must be able to take
 * the write lock (`BEGIN IMMEDIATE`), write and commit at once.
 */
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay, type Envelope, type PublishInput } from 'outboxer';
import { publishInTransaction, sqliteFixture } from '../support/databases.js';
import { waitUntil } from '../support/random.js';

type Probe = { ok: true } | { ok: false; error: string };

describe('SQLite: no write lock is held while the destination is called', () => {
  let fixture: ReturnType<typeof sqliteFixture>;
  let other: Database.Database;
  let tables = 0;

  beforeEach(() => {
    fixture = sqliteFixture();
    fixture.db.exec('CREATE TABLE app_writes (id INTEGER PRIMARY KEY, at INTEGER NOT NULL)');
    // Another writer of the application: a second connection to the same file that never waits.
    other = new Database(fixture.db.name, { timeout: 0 });
  });

  afterEach(async () => {
    other.close();
    await fixture.close();
  });

  /** What another writer of the application sees right now: can it write and commit without waiting? */
  function probe(): Probe {
    try {
      other.exec('BEGIN IMMEDIATE');
      try {
        other.prepare('INSERT INTO app_writes (at) VALUES (?)').run(Date.now());
        other.exec('COMMIT');
      } catch (error) {
        if (other.inTransaction) other.exec('ROLLBACK');
        throw error;
      }
      return { ok: true };
    } catch (error) {
      return { ok: false, error: String((error as { code?: string }).code ?? error) };
    }
  }

  /** A relay that probes on every call, and fails every 4th message once (so settlements write failures too). */
  function probingRelay() {
    const probes: Probe[] = [];
    const delivered = new Set<number>();
    const failedOnce = new Set<number>();
    const relay = functionRelay(async (message: Envelope) => {
      // Also after a turn of the event loop: nothing the engine started meanwhile may hold the lock.
      probes.push(probe());
      await new Promise((resolve) => setImmediate(resolve));
      probes.push(probe());
      const n = (message.payload as { n: number }).n;
      if (n % 4 === 0 && !failedOnce.has(n)) {
        failedOnce.add(n);
        throw new Error(`destination refused ${n}`);
      }
      delivered.add(message.id);
    });
    return { relay, probes, delivered };
  }

  const messages = (count: number): PublishInput[] =>
    Array.from({ length: count }, (_, n) => ({ outbox: 'orders', payload: { n }, groupKey: `g${n % 5}` }));

  test('the probe notices a write transaction held by the outbox connection', () => {
    expect(probe()).toEqual({ ok: true });
    fixture.db.exec('BEGIN IMMEDIATE');
    try {
      expect(probe()).toEqual({ ok: false, error: 'SQLITE_BUSY' });
    } finally {
      fixture.db.exec('ROLLBACK');
    }
    expect(probe()).toEqual({ ok: true });
  });

  test('running workers: every delivery leaves the database writable by another connection', async () => {
    const { relay, probes, delivered } = probingRelay();
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: {
        orders: {
          relay,
          table: `write_lock_${++tables}`,
          partitions: 2,
          batchSize: 10,
          pollInterval: 10,
          backoff: { min: 5, max: 20 },
          retention: { keep: 3600 },
        },
      },
      leaseTimeout: 600,
    });
    await outboxer.migrate();
    const ids = await publishInTransaction(fixture, outboxer, messages(60));
    await outboxer.start();
    try {
      await waitUntil(() => delivered.size === ids.length, 20_000, 'every message delivered');
    } finally {
      await outboxer.stop();
    }
    // 60 messages, 15 of them failing once: at least 150 probes, every one of them able to commit.
    expect(probes.length).toBeGreaterThanOrEqual(150);
    expect(probes.filter((p) => !p.ok)).toEqual([]);
    expect(await outboxer.counts('orders')).toMatchObject({ pending: 0, delivered: 60, dead: 0 });
    expect(fixture.db.prepare('SELECT count(*) AS n FROM app_writes').get()).toEqual({ n: probes.length });
  });

  test('manual testing mode: drain() holds no write lock while delivering either', async () => {
    const { relay, probes, delivered } = probingRelay();
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { orders: { relay, table: `write_lock_${++tables}`, batchSize: 10 } },
      testing: 'manual',
    });
    await outboxer.migrate();
    const ids = await publishInTransaction(fixture, outboxer, messages(30));
    const result = await outboxer.drain('orders');
    expect(result.pending).toBe(0);
    expect(delivered.size).toBe(ids.length);
    expect(probes.length).toBeGreaterThanOrEqual(2 * (30 + 8));
    expect(probes.filter((p) => !p.ok)).toEqual([]);
    await outboxer.close();
  });
});
