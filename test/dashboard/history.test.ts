/** The chart's ring buffer: bounded per outbox, one sample per gap however many pages refresh. */
import { expect, test } from 'vitest';
import { History } from '../../src/dashboard/history.js';

const sample = (at: number, pending = at) => ({ at, pending, dead: 0, delivered: 0 });

test('keeps the newest samples up to its capacity, per outbox', () => {
  const history = new History(3, 100);
  for (const at of [0, 100, 200, 300, 400]) history.add('a', sample(at));
  history.add('b', sample(0));
  expect(history.list('a').map((s) => s.at)).toEqual([200, 300, 400]);
  expect(history.list('b')).toHaveLength(1);
  expect(history.list('c')).toEqual([]);
});

test('samples closer than the gap replace the last one instead of piling up', () => {
  const history = new History(10, 100);
  history.add('a', sample(0));
  history.add('a', sample(100));
  history.add('a', sample(120, 7)); // a second page refreshing at the same time
  history.add('a', sample(150, 9));
  expect(history.list('a').map((s) => [s.at, s.pending])).toEqual([
    [0, 0],
    [150, 9],
  ]);
});
