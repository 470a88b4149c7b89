import { expect, test } from 'vitest';
import { planCalls, planRounds } from './sqs-rounds.js';

test('rounds hold one message per key, in id order; unkeyed messages all go to the first', () => {
  expect(planRounds(['a', 'a', null, 'b', 'a', null])).toEqual([[0, 2, 3, 5], [1], [4]]);
  expect(planRounds(['', '', ''])).toEqual([[0], [1], [2]]); // 'total' ordering: one key
  expect(planRounds([])).toEqual([]);
});

test('calls hold at most 10 entries and 1 MiB, in order', () => {
  const item = (bytes: number) => ({ prepared: { bytes, entry: { Id: '1', MessageBody: 'x' } } });
  expect(planCalls(Array.from({ length: 23 }, () => item(10))).map((c) => c.length)).toEqual([10, 10, 3]);
  expect(planCalls([item(600_000), item(448_576), item(1), item(1_048_576)]).map((c) => c.length)).toEqual([
    2, 1, 1,
  ]);
});
