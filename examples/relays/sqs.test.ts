import { afterEach, expect, test, vi } from 'vitest';
import { main } from './sqs.js';

afterEach(() => {
  vi.restoreAllMocks();
});

// Runs the documented example against ElasticMQ (scripts/services/sqs.sh) and reads what it printed.
test('the SQS example relays both messages of an order to a FIFO queue, in order', async () => {
  const lines: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((line: unknown) => void lines.push(String(line)));
  await main();
  expect(lines).toEqual([
    'order:1 #1 OrderPlaced {"orderId":1,"total":4200}',
    'order:1 #2 OrderPaid {"orderId":1}',
  ]);
});
