/**
 * `outboxer/prometheus`: outboxer's metrics in a prom-client registry, for applications that use
 * prom-client rather than OpenTelemetry. Needs `prom-client` (15.x).
 * @packageDocumentation
 */
export {
  registerOutboxerMetrics,
  type PrometheusMetricsOptions,
  type PrometheusMetrics,
} from './prometheus-metrics.js';
export type { ObservedOutboxer } from '../opentelemetry/outbox-state.js';
