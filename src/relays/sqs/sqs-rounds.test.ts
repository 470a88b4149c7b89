import { expect, test } from 'vitest';
import { planCalls } from './sqs-rounds.js';

// How a batch is cut into rounds (one message per ordering key) is tested with deliverInWaves, in
// src/relays/shared/waves.test.ts.

test('calls hold at most 10 entries and 1 MiB, in order', () => {
  const item = (bytes: number) => ({ prepared: { bytes, entry: { Id: '1', MessageBody: 'x' } } });
  expect(planCalls(Array.from({ length: 23 }, () => item(10))).map((c) => c.length)).toEqual([10, 10, 3]);
  expect(planCalls([item(600_000), item(448_576), item(1), item(1_048_576)]).map((c) => c.length)).toEqual([
    2, 1, 1,
  ]);
});
