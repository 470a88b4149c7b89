/**
 * Ids are drawn at insert, not at commit: a transaction can commit a message below the poll
 * cursor after the cursor moved past its id. The next message of its group, published after that
 * commit, must still not be delivered first. Found by the 35-minute chaos run (docs/reliability.md).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, batchRelay, type Envelope } from 'outboxer';
import { postgresFixture } from '../support/databases.js';
import { waitUntil } from '../support/random.js';

type PgFixture = Awaited<ReturnType<typeof postgresFixture>>;

describe('a message committed late, below the cursor, on postgres', () => {
  let fixture: PgFixture;
  beforeAll(async () => {
    fixture = await postgresFixture();
  });
  afterAll(() => fixture.close());

  // A failure in the first batch makes its settle a transaction of its own, so the next poll is a
  // statement of its own too; without one, the next poll rides on the acknowledgement.
  test.each([
    ['polled with the acknowledgement', false],
    ['polled on its own', true],
  ])('is delivered before the later message of its group (%s)', async (_, failOne) => {
    const deliveries: Envelope[] = [];
    let releaseFirstBatch!: () => void;
    const firstBatchHeld = new Promise<void>((resolve) => (releaseFirstBatch = resolve));
    let batches = 0;
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: {
        late: {
          table: 'late',
          batchSize: 5,
          // No periodic restart of the cursor during the test: only the fix can bring it back.
          pollInterval: 60_000,
          relay: batchRelay(async (batch) => {
            batches += 1;
            if (batches === 1) await firstBatchHeld;
            if (batches === 1 && failOne) {
              deliveries.push(...batch.slice(1));
              return batch.map((_, i) => (i === 0 ? { ok: false, error: new Error('once') } : { ok: true }));
            }
            deliveries.push(...batch);
          }),
        },
      },
    });
    await outboxer.migrate();

    // The early message's transaction stays open while later ids commit.
    const open = await fixture.pool.connect();
    await open.query('BEGIN');
    const early = await outboxer.publish(open, 'late', { n: 'early' }, { groupKey: 'g' });
    await fixture.transaction(async (tx) =>
      outboxer.publishMany(
        tx,
        Array.from({ length: 12 }, (_, i) => ({ outbox: 'late', payload: { n: i }, groupKey: `other:${i}` })),
      ),
    );

    await outboxer.start();
    // The first batch is five of the twelve, all above the early id: the cursor is past it now.
    await waitUntil(() => batches === 1, 10_000, 'the first batch');
    await open.query('COMMIT');
    open.release();
    const later = await fixture.transaction(async (tx) =>
      outboxer.publish(tx, 'late', { n: 'later' }, { groupKey: 'g' }),
    );
    releaseFirstBatch();

    await waitUntil(() => new Set(deliveries.map((m) => m.id)).size === 14, 10_000, 'every message');
    await outboxer.stop();
    const group = deliveries.filter((m) => m.groupKey === 'g').map((m) => m.id);
    expect(group).toEqual([early, later]);
    await outboxer.close();
  });
});
