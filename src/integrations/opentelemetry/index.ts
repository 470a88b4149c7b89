/**
 * `outboxer/opentelemetry`: trace context in message headers, a span per delivered batch linked to
 * the publishers' traces, and metrics. Needs `@opentelemetry/api` (1.x); outboxer's events stay
 * available on `node:diagnostics_channel`.
 * @packageDocumentation
 */
export { traceContextHeaders, extractTraceContext } from './trace-context.js';
export {
  outboxerTracing,
  type OutboxerTracingOptions,
  type OutboxerInstrumentation,
} from './opentelemetry-tracing.js';
export { outboxerMetrics, type OutboxerMetricsOptions } from './opentelemetry-metrics.js';
export type { ObservedOutboxer } from './outbox-state.js';
