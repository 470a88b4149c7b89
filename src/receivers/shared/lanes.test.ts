import { expect, test } from 'vitest';
import { OrderedLanes } from './lanes.js';

const refusal = (failedAt: bigint) => new Error(`refused after ${failedAt}`);

test('calls of one lane run in the order made; those waiting behind a failure are refused', async () => {
  const lanes = new OrderedLanes();
  const ran: string[] = [];
  const work =
    (name: string, fail = false) =>
    async () => {
      ran.push(name);
      await new Promise((resolve) => setImmediate(resolve));
      if (fail) throw new Error(`${name} failed`);
      return name;
    };
  const calls = [
    lanes.run('p0', 5n, work('p0@5'), refusal),
    lanes.run('p0', 6n, work('p0@6', true), refusal),
    lanes.run('p1', 1n, work('p1@1'), refusal), // another lane goes on
    lanes.run('p0', 7n, work('p0@7'), refusal),
    lanes.run('p0', 6n, work('p0@6 again'), refusal), // the failed one, delivered again: it goes through
    lanes.run('p0', 7n, work('p0@7 again'), refusal), // and so does what follows it
  ];
  const settled = await Promise.allSettled(calls);
  expect(settled.map((s) => (s.status === 'fulfilled' ? s.value : String(s.reason)))).toEqual([
    'p0@5',
    'Error: p0@6 failed',
    'p1@1',
    'Error: refused after 6',
    'p0@6 again',
    'p0@7 again',
  ]);
  expect(ran.filter((name) => name.startsWith('p0'))).toEqual(['p0@5', 'p0@6', 'p0@6 again', 'p0@7 again']);
});

test('a lane with nothing waiting starts afresh after a failure', async () => {
  const lanes = new OrderedLanes();
  await expect(lanes.run('p0', 6n, () => Promise.reject(new Error('failed')), refusal)).rejects.toThrow(
    'failed',
  );
  // The partition moved to another consumer, which handled offset 6, and came back at 9.
  await expect(lanes.run('p0', 9n, async () => 'p0@9', refusal)).resolves.toBe('p0@9');
});
