/**
 * Two applications in one Postgres database, a schema each, with the same instance name (the
 * default) and the same outbox name, both with `notify`: one's publisher in flight does not keep
 * the other's idle workers polling. The notify locks are keyed by the message table too, so the
 * "publishing" lock the first holds is not the one the second's poll tests.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay, type Envelope } from 'outboxer';
import { counting, untilQuiet } from '../support/counting.js';
import { postgresFixture, publishInTransaction } from '../support/databases.js';
import { waitUntil } from '../support/random.js';

type Fixture = Awaited<ReturnType<typeof postgresFixture>>;

// A lease of a minute and a poll of a minute: between heartbeats, only notifications move a worker.
const outboxes = (relay: ReturnType<typeof functionRelay> | undefined) => ({
  events: { partitions: 1, pollInterval: 60_000, notify: true, ...(relay ? { relay } : {}) },
});

describe('two applications in one database', () => {
  let first: Fixture;
  let second: Fixture;
  beforeAll(async () => {
    first = await postgresFixture();
    second = await postgresFixture();
  });
  afterAll(async () => {
    await first.close();
    await second.close();
  });

  test("one's publisher in flight leaves the other's idle worker asleep", async () => {
    const publisher = new Outboxer({
      database: first.database,
      relay: false,
      outboxes: outboxes(undefined),
    } as never);
    await (publisher as Outboxer<never, false>).migrate();
    const received: number[] = [];
    const { adapter, counter } = counting(second.database);
    const relaying = new Outboxer({
      database: adapter,
      leaseTimeout: 60_000,
      outboxes: outboxes(functionRelay(async (m: Envelope) => void received.push(m.id))),
    } as never) as Outboxer<never, false>;
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    let inFlight: Promise<unknown> | undefined;
    try {
      await relaying.migrate();
      await relaying.start();
      await untilQuiet(counter);
      // The first application's publisher, in flight until the end of the test.
      let published!: () => void;
      const publishedYet = new Promise<void>((resolve) => (published = resolve));
      inFlight = first.transaction(async (tx) => {
        await (publisher as Outboxer<typeof tx, false>).publishMany(tx, [
          { outbox: 'events', payload: 'theirs' },
        ]);
        published();
        await finished;
      });
      await publishedYet;
      // The second application's own message wakes its worker, which delivers it, then must be
      // able to sleep again.
      const [id] = await publishInTransaction(second, relaying, [{ outbox: 'events', payload: 'ours' }]);
      await waitUntil(() => received.includes(id!), 10_000, 'our message');
      await untilQuiet(counter);
      expect(received).toEqual([id]);
    } finally {
      finish();
      await inFlight;
      await relaying.stop();
    }
  });
});
