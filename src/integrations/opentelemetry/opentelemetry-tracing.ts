import { AsyncLocalStorage } from 'node:async_hooks';
import diagnostics from 'node:diagnostics_channel';
import {
  SpanKind,
  SpanStatusCode,
  isSpanContextValid,
  trace,
  type Link,
  type Span,
  type TracerProvider,
} from '@opentelemetry/api';
import type { Envelope } from '../../core/relay.js';
import type { BatchStopEvent } from './delivery-events.js';
import { extractTraceContext } from './trace-context.js';

export interface OutboxerTracingOptions {
  /** Where spans go. Default: the global tracer provider (`trace.getTracerProvider()`). */
  tracerProvider?: TracerProvider;
  /** Only batches of the instance with this `name`. Default: every instance in the process. */
  instance?: string;
}

/** What {@link outboxerTracing} returns: `close()` unsubscribes. */
export interface OutboxerInstrumentation {
  close(): void;
}

interface BatchStartEvent {
  readonly instance: string;
  readonly outbox: string;
  readonly partition: number;
  readonly size: number;
  readonly messages?: readonly Envelope[];
}

/**
 * One span per batch a relay delivers, linked to the trace context of each message in it.
 *
 * The span, `deliver <outbox>` of kind PRODUCER, starts at `outboxer:batch:start` and ends at
 * `outboxer:batch:stop` on `node:diagnostics_channel`. It is a root span (a batch belongs to no
 * request) with one link per distinct publisher context found in the messages' headers (see
 * {@link traceContextHeaders}); messages published under the same span share a link, whose
 * attribute `outboxer.message_ids` lists them. Its status is ERROR when a message of the batch
 * failed or the batch was abandoned. The relay's own calls (an HTTP request, a Kafka produce) are
 * not children of this span; the destination continues the publisher's trace from the headers.
 *
 * @example
 * import { outboxerTracing } from 'outboxer/opentelemetry';
 * const tracing = outboxerTracing(); // after the OpenTelemetry SDK started
 * // on shutdown: tracing.close();
 */
export function outboxerTracing(options: OutboxerTracingOptions = {}): OutboxerInstrumentation {
  const provider = options.tracerProvider ?? trace.getTracerProvider();
  const tracer = provider.getTracer('outboxer');
  // batch:start and batch:stop are published from the same async flow (the worker's round), so
  // the span travels between them in async-local storage: concurrent batches of other partitions,
  // outboxes or instances never mix.
  const current = new AsyncLocalStorage<{ readonly span: Span; ended: boolean }>();

  const onStart = (message: unknown): void => {
    const event = message as BatchStartEvent;
    if (options.instance !== undefined && event.instance !== options.instance) return;
    const span = tracer.startSpan(`deliver ${event.outbox}`, {
      kind: SpanKind.PRODUCER,
      root: true,
      links: linksOf(event.messages ?? []),
      attributes: {
        'messaging.operation.type': 'send',
        'messaging.operation.name': 'deliver',
        'messaging.batch.message_count': event.size,
        'outboxer.instance': event.instance,
        'outboxer.outbox': event.outbox,
        'outboxer.partition': event.partition,
      },
    });
    current.enterWith({ span, ended: false });
  };

  const onStop = (message: unknown): void => {
    const event = message as BatchStopEvent;
    if (options.instance !== undefined && event.instance !== options.instance) return;
    const state = current.getStore();
    if (state === undefined || state.ended) return;
    state.ended = true;
    const { span } = state;
    span.setAttributes({
      'outboxer.batch.delivered': event.delivered,
      'outboxer.batch.failed': event.failed,
      'outboxer.batch.aborted': event.aborted,
    });
    if (event.aborted) {
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: 'abandoned: nothing of the batch was acknowledged',
      });
    } else if (event.failed > 0) {
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: `${event.failed} of ${event.size} messages failed`,
      });
    }
    span.end();
  };

  diagnostics.subscribe('outboxer:batch:start', onStart);
  diagnostics.subscribe('outboxer:batch:stop', onStop);
  return {
    close() {
      diagnostics.unsubscribe('outboxer:batch:start', onStart);
      diagnostics.unsubscribe('outboxer:batch:stop', onStop);
    },
  };
}

/** One link per distinct span context in the messages' headers, listing the ids published under it. */
function linksOf(messages: readonly Envelope[]): Link[] {
  const links = new Map<string, { link: Link; ids: number[] }>();
  for (const message of messages) {
    if (message.headers === undefined || Object.keys(message.headers).length === 0) continue;
    const spanContext = trace.getSpanContext(extractTraceContext(message.headers));
    if (spanContext === undefined || !isSpanContextValid(spanContext)) continue;
    const key = `${spanContext.traceId}-${spanContext.spanId}`;
    const entry = links.get(key) ?? { link: { context: spanContext }, ids: [] };
    entry.ids.push(message.id);
    links.set(key, entry);
  }
  return [...links.values()].map(({ link, ids }) => ({
    ...link,
    attributes: { 'outboxer.message_ids': ids },
  }));
}
