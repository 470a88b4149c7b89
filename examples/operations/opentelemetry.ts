/**
 * outboxer with OpenTelemetry: the trace of the request that published a message continues at the
 * destination, the relay's batch span links to it, and the outbox's metrics are exported.
 *
 * The SDK set-up below is what the Node SDK (`@opentelemetry/sdk-node`) does for you; in-memory
 * exporters stand in for OTLP so that the example runs on its own. SQLite and a webhook receiver
 * on 127.0.0.1 play the database and the destination.
 *
 *   npx tsx examples/operations/opentelemetry.ts
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { context, metrics, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import Database from 'better-sqlite3';
import { Outboxer, defineMessage } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { webhookRelay } from 'outboxer/webhook';
import {
  extractTraceContext,
  outboxerMetrics,
  outboxerTracing,
  traceContextHeaders,
} from 'outboxer/opentelemetry';

const OrderPlaced = defineMessage<{ orderId: number }>({
  outbox: 'orders',
  type: 'order.placed',
  groupKey: (order) => `order:${order.orderId}`,
});

export async function main() {
  // 1. The SDK (NodeSDK does this): context, W3C propagation, a tracer and a meter provider.
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const metricReader = new PeriodicExportingMetricReader({
    exporter: metricExporter,
    exportIntervalMillis: 60_000,
  });
  const meterProvider = new MeterProvider({ readers: [metricReader] });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
  const tracer = trace.getTracer('shop');

  // 2. The destination continues the publisher's trace from the request headers.
  const received: Array<{ traceparent: string | undefined; consumerTraceId: string }> = [];
  const receiver = createServer((req, res) => {
    const parent = extractTraceContext(req.headers as Record<string, string>);
    tracer.startActiveSpan('handle order.placed', {}, parent, (span) => {
      received.push({
        traceparent: req.headers.traceparent?.toString(),
        consumerTraceId: span.spanContext().traceId,
      });
      span.end();
    });
    res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks`;

  // 3. outboxer: every message carries the publisher's trace context; spans and metrics on.
  const db = new Database(':memory:');
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
    publishHeaders: traceContextHeaders,
    outboxes: { orders: { relay: webhookRelay({ url }), pollInterval: 50 } },
  });
  const tracing = outboxerTracing();
  const telemetry = outboxerMetrics(outboxer, { outboxes: ['orders'] });

  try {
    await outboxer.migrate();
    await outboxer.start();

    // A request: the message is published inside its span.
    const request = await tracer.startActiveSpan('POST /orders', async (span) => {
      db.transaction(() => outboxer.publish(db, OrderPlaced({ orderId: 1 })))();
      span.end();
      return span.spanContext();
    });

    const deadline = Date.now() + 10_000;
    while (received.length === 0 || (await outboxer.counts('orders')).pending > 0) {
      if (Date.now() > deadline) throw new Error('the webhook was not delivered within 10 s');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await metricReader.forceFlush();

    const batch = spans.getFinishedSpans().find((span) => span.name === 'deliver orders')!;
    const exported = metricExporter
      .getMetrics()
      .at(-1)!
      .scopeMetrics.flatMap((scope) => scope.metrics);
    const value = (name: string) =>
      exported.find((metric) => metric.descriptor.name === name)?.dataPoints[0]?.value as number | undefined;
    console.log(`request trace ${request.traceId}`);
    console.log(`webhook traceparent ${received[0]!.traceparent}`);
    console.log(`consumer span in trace ${received[0]!.consumerTraceId}`);
    console.log(`batch span "${batch.name}" links to trace ${batch.links[0]?.context.traceId}`);
    console.log(
      `delivered ${value('outboxer.messages.delivered')}, pending ${value('outboxer.messages.pending')}`,
    );
    return { request, received, batch, delivered: value('outboxer.messages.delivered') };
  } finally {
    await outboxer.stop();
    telemetry.close();
    tracing.close();
    db.close();
    await new Promise((resolve) => receiver.close(resolve));
    await meterProvider.shutdown();
    await tracerProvider.shutdown();
    trace.disable();
    metrics.disable();
    propagation.disable();
    context.disable();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
