/**
 * A restart after a crash: the crashed process's lease is still in the table, unrenewed. The new
 * node says what it waits for (which partition, held by whom, until when), then takes the
 * partition over when the lease lapses and delivers. A restart under the same `nodeId` (one process
 * per identity) takes it back at once.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay, type Logger } from 'outboxer';
import {
  engineFixtures,
  reportSkippedFixtures,
  publishInTransaction,
  type EngineFixture,
} from '../support/databases.js';
import { waitUntil } from '../support/random.js';

const LEASE_TIMEOUT = 3_000;

function recordingLogger(warnings: Array<[string, Record<string, unknown> | undefined]>): Logger {
  return {
    debug: () => undefined,
    info: () => undefined,
    warn: (message, context) => void warnings.push([message, context]),
    error: () => undefined,
  };
}

/** What a process that crashed leaves: its lease of partition 0, unrenewed, `left` ms from lapsing. */
async function leaveLease(fixture: EngineFixture, table: string, owner: string, left: number): Promise<void> {
  if (fixture.kind === 'sqlite') {
    await fixture.query(
      `INSERT INTO ${table}_leases (outbox, partition, owner, epoch, lease_until) VALUES ('orders', 0, ?, 1, ?)`,
      [owner, Date.now() + left],
    );
  } else if (fixture.kind === 'mysql') {
    // Unix milliseconds of the server's clock, as the dialect writes them.
    await fixture.query(
      `INSERT INTO ${table}_leases (outbox, "partition", owner, epoch, lease_until) VALUES ('orders', 0, ?, 1, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 + ?)`,
      [owner, left],
    );
  } else {
    await fixture.query(
      `INSERT INTO ${table}_leases (outbox, partition, owner, epoch, lease_until) VALUES ('orders', 0, $1, 1, now() + $2 * interval '1 millisecond')`,
      [owner, left],
    );
  }
}

describe.each(engineFixtures)('a restart after a crash on $name', ({ make }) => {
  let fixture: EngineFixture;
  beforeAll(async () => void (fixture = await make()));
  afterAll(() => fixture.close());

  test('the new node names the lease it waits for, then takes the partition over', async () => {
    const warnings: Array<[string, Record<string, unknown> | undefined]> = [];
    const logger = recordingLogger(warnings);
    const delivered: unknown[] = [];
    const outboxer = new Outboxer({
      database: fixture.database,
      leaseTimeout: LEASE_TIMEOUT,
      logger,
      outboxes: {
        orders: {
          relay: functionRelay(async (m) => void delivered.push(m.payload)),
          table: 'crashed',
          pollInterval: 50,
        },
      },
    });
    await outboxer.migrate();
    // What a process that crashed a third of a lease ago leaves: its lease, no longer renewed.
    await leaveLease(fixture, 'crashed', 'outboxer:crashed', (LEASE_TIMEOUT * 2) / 3 - 200);
    await publishInTransaction(fixture, outboxer, [{ outbox: 'orders', payload: 'after the crash' }]);
    await outboxer.start();
    try {
      await waitUntil(
        () => warnings.some(([m]) => m.includes('waiting for partition 0')),
        20_000,
        'the warning',
      );
      const [message, context] = warnings.find(([m]) => m.includes('waiting for partition 0'))!;
      expect(message).toContain('held by outboxer:crashed, which stopped renewing it');
      expect(context).toMatchObject({ outbox: 'orders', partition: 0, holder: 'outboxer:crashed' });
      expect((context!.until as Date).getTime()).toBeGreaterThan(Date.now() - LEASE_TIMEOUT);
      await waitUntil(() => delivered.length === 1, 20_000, 'the delivery after the lease lapsed');
      expect(delivered).toEqual(['after the crash']);
      // Said once, not at every coordination tick.
      expect(warnings.filter(([m]) => m.includes('waiting for partition 0'))).toHaveLength(1);
    } finally {
      await outboxer.stop();
    }
  }, 60_000);

  test('a restart under the same nodeId takes the partition back without waiting for the lease', async () => {
    const warnings: Array<[string, Record<string, unknown> | undefined]> = [];
    const delivered: unknown[] = [];
    const outboxer = new Outboxer({
      database: fixture.database,
      nodeId: 'relay-0',
      leaseTimeout: LEASE_TIMEOUT,
      logger: recordingLogger(warnings),
      outboxes: {
        orders: {
          relay: functionRelay(async (m) => void delivered.push(m.payload)),
          table: 'restarted',
          pollInterval: 50,
        },
      },
    });
    await outboxer.migrate();
    // The predecessor's lease lapses only in 10 minutes: a delivery now means it was taken back.
    await leaveLease(fixture, 'restarted', 'relay-0', 600_000);
    await publishInTransaction(fixture, outboxer, [{ outbox: 'orders', payload: 'after the restart' }]);
    await outboxer.start();
    try {
      await waitUntil(() => delivered.length === 1, 20_000, 'the delivery under the same nodeId');
      expect(delivered).toEqual(['after the restart']);
      expect(warnings.filter(([m]) => m.includes('waiting for partition'))).toEqual([]);
    } finally {
      await outboxer.stop();
    }
  }, 60_000);
});

reportSkippedFixtures('a restart after a crash');
