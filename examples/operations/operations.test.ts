import { afterEach, expect, test, vi } from 'vitest';

afterEach(() => {
  vi.restoreAllMocks();
});

function captureConsole(): string[] {
  const lines: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((line: unknown) => void lines.push(String(line)));
  return lines;
}

// Runs the documented examples of docs/operations.md and docs/opentelemetry.md.
test('the OpenTelemetry example: the destination and the batch span carry the request trace', async () => {
  const lines = captureConsole();
  const { main } = await import('./opentelemetry.js');
  const { request, received, batch, delivered } = await main();
  expect(received).toEqual([
    { traceparent: `00-${request.traceId}-${request.spanId}-01`, consumerTraceId: request.traceId },
  ]);
  expect(batch.links.map((link) => link.context)).toMatchObject([
    { traceId: request.traceId, spanId: request.spanId },
  ]);
  expect(delivered).toBe(1);
  expect(lines).toEqual([
    `request trace ${request.traceId}`,
    `webhook traceparent 00-${request.traceId}-${request.spanId}-01`,
    `consumer span in trace ${request.traceId}`,
    `batch span "deliver orders" links to trace ${request.traceId}`,
    'delivered 1, pending 0',
  ]);
});

test('the Prometheus example serves outboxer metrics on /metrics', async () => {
  const lines = captureConsole();
  const { main } = await import('./prometheus.js');
  const text = await main();
  expect(text).toContain('# TYPE outboxer_messages_pending gauge');
  expect(text).toContain('process_cpu_user_seconds_total');
  expect(lines).toEqual([
    'outboxer_messages_pending{outbox="orders"} 0',
    'outboxer_messages_dead{outbox="orders"} 1',
    'outboxer_groups_blocked{outbox="orders",parked="false"} 0',
    'outboxer_groups_blocked{outbox="orders",parked="true"} 0',
    'outboxer_messages_delivered_total{outbox="orders"} 1',
    'outboxer_messages_dead_lettered_total{outbox="orders"} 1',
  ]);
});

test('the runbook example unblocks a group and redrives parked dead messages in order', async () => {
  const lines = captureConsole();
  const { main } = await import('./runbook.js');
  await main();
  expect(lines).toEqual([
    'orders: delivered #3 (order:7)',
    'orders: order:42 blocked by #1 after 3 attempts, 1 waiting: PermanentError: schema v0 is not accepted any more',
    'orders: delivered #2 (order:42)',
    'payments: #4 dead after 3 attempts: Error: 503 from payments',
    'payments: delivered #4 (payment:9)',
    'payments: delivered #5 (payment:9)',
    '{"pending":0,"dead":0}',
  ]);
});
