import { afterEach, expect, test, vi } from 'vitest';
import { main } from './kafka.js';

afterEach(() => {
  vi.restoreAllMocks();
});

// Runs the documented example against the Kafka broker (scripts/services/kafka.sh) and reads what it printed.
test('the Kafka example relays both messages of an order, keyed and in order', async () => {
  const lines: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((line: unknown) => void lines.push(String(line)));
  await main();
  expect(lines).toEqual([
    'order:1 #1 OrderPlaced {"orderId":1,"total":4200}',
    'order:1 #2 OrderPaid {"orderId":1}',
  ]);
});
