/**
 * serializeWrites on one real Postgres: concurrent publishers of one group queue up, so id order is
 * commit order, while another group is not held up; without it, the second publisher does not wait.
 */
import { describe, expect, test } from 'vitest';
import { sleep } from '../support/random.js';
import { fixture, instance, newTable, setUpPostgres } from './support.js';

setUpPostgres();

describe('serializeWrites', () => {
  async function race(serializeWrites: boolean) {
    const table = newTable();
    const node = instance(table, { serializeWrites }, { relay: false });
    await node.migrate();
    const first = await fixture.pool.connect();
    const second = await fixture.pool.connect();
    try {
      await first.query('BEGIN');
      await second.query('BEGIN');
      const firstId = await node.publish(first as never, 'events', 'first', { groupKey: 'order:1' });
      let secondId: number | undefined;
      const secondPublish = (
        node.publish(second as never, 'events', 'second', { groupKey: 'order:1' }) as Promise<number>
      ).then((id) => (secondId = id));
      await sleep(300);
      const blocked = secondId === undefined;
      const otherGroup = await (async () => {
        // Another group is not held up by the lock.
        const third = await fixture.pool.connect();
        try {
          await third.query('BEGIN');
          const id = await node.publish(third as never, 'events', 'other', { groupKey: 'order:2' });
          await third.query('COMMIT');
          return id;
        } finally {
          third.release();
        }
      })();
      await first.query('COMMIT');
      await secondPublish;
      await second.query('COMMIT');
      return { blocked, firstId, secondId: secondId!, otherGroup };
    } finally {
      first.release();
      second.release();
    }
  }

  test('concurrent publishers of one group queue up, so id order is commit order', async () => {
    const result = await race(true);
    expect(result.blocked).toBe(true);
    expect(result.secondId).toBeGreaterThan(result.firstId);
    expect(result.otherGroup).toBeGreaterThan(result.firstId);
  });

  test('without it, the second publisher does not wait (the control experiment)', async () => {
    const result = await race(false);
    expect(result.blocked).toBe(false);
  });
});
