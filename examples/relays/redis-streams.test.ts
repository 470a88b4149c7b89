import { afterEach, expect, test, vi } from 'vitest';
import { main } from './redis-streams.js';

afterEach(() => {
  vi.restoreAllMocks();
});

// Runs the documented example against Redis on 127.0.0.1:6379 and reads what it printed.
test('the Redis Streams example appends both messages of an order to a stream, in order', async () => {
  const lines: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((line: unknown) => void lines.push(String(line)));
  await main();
  expect(lines).toEqual([
    'order:1 #1 OrderPlaced {"orderId":1,"total":4200}',
    'order:1 #2 OrderPaid {"orderId":1}',
  ]);
});
