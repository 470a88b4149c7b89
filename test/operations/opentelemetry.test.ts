/**
 * outboxer/opentelemetry: the publisher's trace context travels through a real relay to the
 * destination's headers and the relay's batch span links to it; metric values match known states.
 */
import { context, propagation, trace, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  AggregationTemporality,
  DataPointType,
  MeterProvider,
  MetricReader,
  type DataPoint,
  type Histogram,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { Outboxer } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { webhookRelay } from 'outboxer/webhook';
import {
  extractTraceContext,
  outboxerMetrics,
  outboxerTracing,
  traceContextHeaders,
} from '../../src/integrations/opentelemetry/index.js';
import {
  postgresAndSqlite as fixtures,
  type PostgresOrSqliteFixture as Fixture,
} from '../support/databases.js';
import { waitUntil } from '../support/random.js';
import { knownOutboxes, produceKnownState, startReceiver } from './support.js';

/** A reader the test collects from by hand. */
class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

async function collect(reader: MetricReader): Promise<MetricData[]> {
  const { resourceMetrics, errors } = await reader.collect();
  expect(errors).toEqual([]);
  return resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics);
}

/** The value of `name` for these attributes (a number, or a histogram), or undefined. */
function valueOf(
  metrics: MetricData[],
  name: string,
  attributes: Record<string, string>,
): number | Histogram | undefined {
  const metric = metrics.find((m) => m.descriptor.name === name);
  const point = (metric?.dataPoints as Array<DataPoint<number | Histogram>> | undefined)?.find((p) =>
    Object.entries(attributes).every(([k, v]) => p.attributes[k] === v),
  );
  return point?.value;
}

const contextManager = new AsyncLocalStorageContextManager();
beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
});
afterAll(() => {
  context.disable();
  propagation.disable();
});

test('traceContextHeaders: the active span as W3C traceparent and tracestate; {} outside a span', () => {
  const provider = new BasicTracerProvider();
  const tracer = provider.getTracer('test');
  expect(traceContextHeaders()).toEqual({});
  tracer.startActiveSpan('publish', (span) => {
    const { traceId, spanId } = span.spanContext();
    const headers = traceContextHeaders();
    expect(headers.traceparent).toBe(`00-${traceId}-${spanId}-01`);
    // and back: a consumer continues the same trace
    const extracted = trace.getSpanContext(extractTraceContext({ TraceParent: headers.traceparent! }));
    expect(extracted).toMatchObject({ traceId, spanId, isRemote: true });
    span.end();
  });
});

describe.each(fixtures)('on $name', ({ make }) => {
  let fixture: Fixture;
  beforeAll(async () => {
    fixture = await make();
  });
  afterAll(() => fixture.close());

  test('the trace context reaches the destination through a real webhook relay, and the batch span links to the publisher', async () => {
    const exporter = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const tracer = tracerProvider.getTracer('app');
    // The receiver continues the publisher's trace from the headers, as a consumer would.
    const consumerTraces: string[] = [];
    const receiver = await startReceiver((request) => {
      const parent = extractTraceContext(request.headers as Record<string, string>);
      const span = tracer.startSpan('handle webhook', { kind: SpanKind.CONSUMER }, parent);
      consumerTraces.push(span.spanContext().traceId);
      span.end();
    });
    const name = `traced_${process.pid}_${fixture.kind}`;
    const tracing = outboxerTracing({ tracerProvider, instance: name });
    const meterReader = new TestReader();
    const outboxer = new Outboxer({
      database: fixture.database,
      name,
      publishHeaders: traceContextHeaders,
      outboxes: {
        traced: {
          relay: webhookRelay({ url: receiver.url }),
          table: `traced_${fixture.kind}`,
          pollInterval: 20,
        },
      },
    }) as Outboxer<never, boolean>;
    const telemetry = outboxerMetrics(outboxer, {
      outboxes: ['traced'],
      meterProvider: new MeterProvider({ readers: [meterReader] }),
      interval: 0,
    });
    try {
      await outboxer.migrate();
      await outboxer.start();

      // Two messages in one request span, one published outside any span.
      let publisher = { traceId: '', spanId: '' };
      let traced: number[] = [];
      await tracer.startActiveSpan('POST /orders', async (span) => {
        publisher = span.spanContext();
        traced = await publishMany(fixture, outboxer, ['a', 'b']);
        span.end();
      });
      const [untraced] = await publishMany(fixture, outboxer, ['c']);

      await waitUntil(() => receiver.requests.length === 3, 10_000, 'three webhooks');
      const traceparents = receiver.requests.map((r) => r.headers.traceparent);
      expect(traceparents).toEqual([
        `00-${publisher.traceId}-${publisher.spanId}-01`,
        `00-${publisher.traceId}-${publisher.spanId}-01`,
        undefined,
      ]);
      expect(receiver.requests.map((r) => r.headers['outboxer-id'])).toEqual(
        [...traced, untraced].map(String),
      );
      expect(consumerTraces.slice(0, 2)).toEqual([publisher.traceId, publisher.traceId]);

      // A relaying node: deliveries are counted and its heartbeat is seen.
      await waitUntil(async () => (await outboxer.counts('traced')).pending === 0, 5000, 'acknowledged');
      const metrics = await collect(meterReader);
      expect(valueOf(metrics, 'outboxer.messages.delivered', { outbox: 'traced' })).toBe(3);
      expect(valueOf(metrics, 'outboxer.messages.pending', { outbox: 'traced' })).toBe(0);
      expect(valueOf(metrics, 'outboxer.relay.last_seen_age', { outbox: 'traced' })).toBeLessThan(30);

      await outboxer.stop();
      const spans = batchSpans(exporter);
      for (const span of spans) {
        expect(span.name).toBe('deliver traced');
        expect(span.kind).toBe(SpanKind.PRODUCER);
        expect(span.parentSpanContext).toBeUndefined(); // a root: the batch belongs to no request
        expect(span.spanContext().traceId).not.toBe(publisher.traceId);
        expect(span.attributes).toMatchObject({
          'outboxer.instance': name,
          'outboxer.outbox': 'traced',
          'outboxer.batch.failed': 0,
          'outboxer.batch.aborted': false,
        });
        expect(span.status.code).toBe(SpanStatusCode.UNSET);
      }
      const links = spans.flatMap((span) => span.links);
      expect(links.map((link) => [link.context.traceId, link.context.spanId])).toEqual(
        links.map(() => [publisher.traceId, publisher.spanId]),
      );
      expect(links.flatMap((link) => link.attributes?.['outboxer.message_ids'] as number[])).toEqual(traced);
      expect(spans.reduce((n, s) => n + Number(s.attributes['outboxer.batch.delivered']), 0)).toBe(3);
    } finally {
      telemetry.close();
      tracing.close();
      await outboxer.stop();
      await receiver.close();
      await tracerProvider.shutdown();
    }
  });

  test('a batch with a failure ends its span with status ERROR', async () => {
    const exporter = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const outboxer = knownOutboxes(fixture);
    const tracing = outboxerTracing({ tracerProvider, instance: outboxer.settings.name });
    try {
      await produceKnownState(fixture, outboxer);
      const spans = batchSpans(exporter);
      expect(spans.length).toBeGreaterThanOrEqual(3);
      const failing = spans.filter((s) => s.status.code === SpanStatusCode.ERROR);
      expect(failing.length).toBeGreaterThan(0);
      expect(failing[0]!.status.message).toMatch(/^\d+ of \d+ messages failed$/);
      expect(new Set(spans.map((s) => s.name))).toEqual(new Set(['deliver known', 'deliver strict']));
      // Published outside any span: no links.
      expect(spans.flatMap((s) => s.links)).toEqual([]);
    } finally {
      tracing.close();
      await outboxer.close();
    }
    const before = batchSpans(exporter).length;
    await publishAndDrainOne(fixture, outboxer);
    expect(batchSpans(exporter).length).toBe(before); // closed: no more spans
  });

  test('metrics match a known state: gauges from the tables, counters from the events', async () => {
    const outboxer = knownOutboxes(fixture);
    const reader = new TestReader();
    const telemetry = outboxerMetrics(outboxer, {
      outboxes: ['known', 'strict'],
      meterProvider: new MeterProvider({ readers: [reader] }),
      interval: 0,
    });
    try {
      const started = Date.now();
      await produceKnownState(fixture, outboxer);
      const metrics = await collect(reader);
      const elapsed = (Date.now() - started) / 1000 + 1;

      const known = { outbox: 'known' };
      const strict = { outbox: 'strict' };
      expect(valueOf(metrics, 'outboxer.messages.delivered', known)).toBe(2);
      expect(valueOf(metrics, 'outboxer.messages.retried', known)).toBe(2);
      expect(valueOf(metrics, 'outboxer.messages.dead_lettered', known)).toBe(2);
      expect(valueOf(metrics, 'outboxer.messages.pending', known)).toBe(2);
      expect(valueOf(metrics, 'outboxer.messages.dead', known)).toBe(2);
      expect(valueOf(metrics, 'outboxer.messages.orphaned', known)).toBe(0);
      expect(valueOf(metrics, 'outboxer.groups.blocked', { ...known, parked: 'true' })).toBe(1);
      expect(valueOf(metrics, 'outboxer.groups.blocked', { ...known, parked: 'false' })).toBe(0);

      expect(valueOf(metrics, 'outboxer.messages.delivered', strict)).toBe(0);
      expect(valueOf(metrics, 'outboxer.messages.retried', strict)).toBe(2);
      expect(valueOf(metrics, 'outboxer.messages.dead_lettered', strict)).toBeUndefined();
      expect(valueOf(metrics, 'outboxer.messages.pending', strict)).toBe(2);
      expect(valueOf(metrics, 'outboxer.messages.dead', strict)).toBe(0);
      expect(valueOf(metrics, 'outboxer.groups.blocked', { ...strict, parked: 'false' })).toBe(1);
      expect(valueOf(metrics, 'outboxer.groups.blocked', { ...strict, parked: 'true' })).toBe(0);

      for (const outbox of [known, strict]) {
        const pendingAge = valueOf(metrics, 'outboxer.messages.oldest_pending_age', outbox) as number;
        expect(pendingAge).toBeGreaterThanOrEqual(0);
        expect(pendingAge).toBeLessThan(elapsed);
        const blockedAge = valueOf(metrics, 'outboxer.groups.oldest_blocked_age', outbox) as number;
        expect(blockedAge).toBeGreaterThanOrEqual(0);
        expect(blockedAge).toBeLessThan(elapsed);
        // Manual mode never heartbeats: no relay was ever seen.
        expect(valueOf(metrics, 'outboxer.relay.last_seen_age', outbox)).toBeUndefined();
      }

      const duration = valueOf(metrics, 'outboxer.batch.duration', known) as Histogram;
      const size = valueOf(metrics, 'outboxer.batch.size', known) as Histogram;
      expect(duration.count).toBe(size.count);
      expect(duration.count).toBeGreaterThanOrEqual(2);
      // Batch sizes add up to every hand-over: 6 in the first round, then the 2 failures again.
      expect(size.sum).toBe(8);
      const descriptor = metrics.find((m) => m.descriptor.name === 'outboxer.batch.duration')!;
      expect(descriptor.descriptor.unit).toBe('s');
      expect(descriptor.dataPointType).toBe(DataPointType.HISTOGRAM);

      // The known state changes; the gauges follow it at the next collection.
      await outboxer.discard('known', [(await outboxer.listDead('known'))[0]!.id]);
      const after = await collect(reader);
      expect(valueOf(after, 'outboxer.messages.dead', known)).toBe(1);
      expect(valueOf(after, 'outboxer.groups.blocked', { ...known, parked: 'true' })).toBe(0);
    } finally {
      telemetry.close();
      await outboxer.close();
    }
  });

  test('the tables are read at most once per interval, however often metrics are collected', async () => {
    const outboxer = knownOutboxes(fixture);
    await outboxer.migrate();
    const counts = vi.spyOn(outboxer, 'counts');
    const reader = new TestReader();
    const telemetry = outboxerMetrics(outboxer, {
      outboxes: ['known'],
      meterProvider: new MeterProvider({ readers: [reader] }),
      interval: 60_000,
    });
    try {
      await Promise.all([collect(reader), collect(reader)]);
      await collect(reader);
      expect(counts).toHaveBeenCalledTimes(1);
    } finally {
      telemetry.close();
      await outboxer.close();
    }
  });
});

test('an unknown outbox is refused when the metrics are set up, not at the first export', () => {
  const outboxer = new Outboxer({
    database: betterSqlite3(new Database(':memory:')),
    relay: false,
    outboxes: { orders: {} },
  });
  expect(() => outboxerMetrics(outboxer, { outboxes: ['order'] })).toThrow(/Unknown outbox "order"/);
  expect(() => outboxerMetrics(outboxer, { outboxes: [] })).toThrow(/outboxes/);
});

function batchSpans(exporter: InMemorySpanExporter): ReadableSpan[] {
  return exporter.getFinishedSpans().filter((span) => span.name.startsWith('deliver '));
}

async function publishMany(
  fixture: Fixture,
  outboxer: Outboxer<never, boolean>,
  payloads: string[],
): Promise<number[]> {
  const inputs = payloads.map((payload) => ({ outbox: 'traced', payload, groupKey: 'order:1' }));
  if (fixture.kind === 'sqlite') {
    return fixture.transaction((tx) => outboxer.publishMany(tx as never, inputs) as number[]);
  }
  return fixture.transaction((tx) => outboxer.publishMany(tx as never, inputs) as Promise<number[]>);
}

async function publishAndDrainOne(fixture: Fixture, outboxer: Outboxer<never, boolean>): Promise<void> {
  if (fixture.kind === 'sqlite') {
    await fixture.transaction((tx) => outboxer.publish(tx as never, 'known', 'one-more'));
  } else {
    await fixture.transaction((tx) => outboxer.publish(tx as never, 'known', 'one-more') as Promise<number>);
  }
  await outboxer.drain('known');
}
