import { afterEach, expect, test, vi } from 'vitest';
import { main } from './nats.js';

afterEach(() => {
  vi.restoreAllMocks();
});

// Runs the documented example against NATS JetStream on 127.0.0.1:4222 and reads what it printed.
test('the NATS example relays both messages of an order to a stream, in order', async () => {
  const lines: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((line: unknown) => void lines.push(String(line)));
  await main();
  expect(lines).toEqual(['order:1 #1 placed {"orderId":1,"total":4200}', 'order:1 #2 paid {"orderId":1}']);
});
