/**
 * `notify: true` coalesces NOTIFYs: a publishing transaction leaves its NOTIFY out while another
 * one in flight will send the same payload. The worker must then never wait for a notification
 * that will not come: these tests hold a publishing transaction open across the other's
 * notification and check that its message still goes out, long before the poll interval.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay, type DatabaseAdapter } from 'outboxer';
import { DATABASE_URL, postgresFixture } from '../support/databases.js';
import { sleep, waitUntil } from '../support/random.js';

type PgFixture = Awaited<ReturnType<typeof postgresFixture>>;

describe('notify on postgres: coalesced notifications', () => {
  let fixture: PgFixture;
  let listener: pg.Client;
  const received: string[] = [];

  beforeAll(async () => {
    fixture = await postgresFixture();
    listener = new pg.Client({ connectionString: DATABASE_URL });
    await listener.connect();
    listener.on('notification', (message) => received.push(message.payload ?? ''));
    await listener.query('LISTEN outboxer');
  });

  afterAll(async () => {
    await listener.end();
    await fixture.close();
  });

  /**
   * A started outboxer whose one outbox relays with `notify` and a poll interval of a minute (its
   * lease of five: an idle worker also polls every third of its lease), once its worker has polled
   * the empty table and waits for a notification.
   */
  async function notifyingRelay(outbox: string, database: DatabaseAdapter = fixture.database) {
    const delivered: unknown[] = [];
    const outboxer = new Outboxer({
      database,
      leaseTimeout: 300_000,
      outboxes: {
        [outbox]: {
          table: outbox,
          notify: true,
          pollInterval: 60_000,
          relay: functionRelay(async (message) => {
            delivered.push(message.payload);
          }),
        },
      },
    });
    await outboxer.migrate();
    await outboxer.start();
    await sleep(300);
    /** Opens a transaction on its own client and publishes one message in it; commit it later. */
    const publishOpen = async (payload: string) => {
      const client = await fixture.pool.connect();
      await client.query('BEGIN');
      await outboxer.publish(client, outbox, payload, { groupKey: payload });
      return {
        async commit() {
          await client.query('COMMIT');
          client.release();
        },
      };
    };
    const notifications = () => received.filter((p) => p.endsWith(`:${outbox}:0`)).length;
    return { outboxer, delivered, publishOpen, notifications };
  }

  test('a transaction that left its NOTIFY out to one already received is still picked up at once', async () => {
    const { outboxer, delivered, publishOpen, notifications } = await notifyingRelay('coalesce');
    const first = await publishOpen('first');
    const second = await publishOpen('second'); // `first` will notify: not this one
    await first.commit();
    await waitUntil(() => delivered.length === 1, 10_000, 'the first message');
    await sleep(300); // long enough for a worker that waits for a notification to be waiting
    await second.commit();
    // Without a notification the worker would only poll again after a minute.
    await waitUntil(() => delivered.length === 2, 5_000, 'the second message');

    expect(delivered).toEqual(['first', 'second']);
    expect(notifications()).toBe(1); // two publishing transactions, one NOTIFY
    await outboxer.close();
  });

  test('publishers that do not overlap each notify', async () => {
    const { outboxer, delivered, publishOpen, notifications } = await notifyingRelay('apart');
    for (const payload of ['a', 'b', 'c']) {
      await (await publishOpen(payload)).commit();
      await waitUntil(() => delivered.includes(payload), 10_000, `message ${payload}`);
    }
    // The test's own listener may hear the last NOTIFY after the relay's listener acted on it.
    await waitUntil(() => notifications() >= 3, 10_000, 'three notifications');
    expect(notifications()).toBe(3);
    await outboxer.close();
  });

  test('while a publisher that left its NOTIFY out stays open, the worker polls with backoff, not flat out', async () => {
    let polls = 0;
    const counting: DatabaseAdapter = {
      ...fixture.database,
      execute: (query) => {
        if (query.text.includes('publishers_quiet')) polls += 1;
        return fixture.database.execute(query);
      },
    };
    const { outboxer, delivered, publishOpen } = await notifyingRelay('held', counting);
    const first = await publishOpen('first');
    const second = await publishOpen('second');
    await first.commit();
    await waitUntil(() => delivered.length === 1, 10_000, 'the first message');
    const before = polls;
    await sleep(1_000);
    const during = polls - before;
    await second.commit();
    await waitUntil(() => delivered.length === 2, 5_000, 'the second message');
    // Backoff from 1 ms to 50 ms: about 25 polls in that second; flat out would be hundreds.
    expect(during).toBeGreaterThan(5);
    expect(during).toBeLessThan(60);
    await outboxer.close();
  });
});
