import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { OutboxerError } from '../../core/errors.js';
import { subscribeDeliveryEvents } from '../opentelemetry/delivery-events.js';
import {
  BATCH_DURATION_BUCKETS,
  BATCH_SIZE_BUCKETS,
  EVENT_METRICS,
  GAUGES,
  type MetricDefinition,
} from '../opentelemetry/metric-definitions.js';
import { OutboxStateReader, type ObservedOutboxer, type OutboxState } from '../opentelemetry/outbox-state.js';

export interface PrometheusMetricsOptions {
  /** The outboxes to report, by name. */
  outboxes: readonly string[];
  /**
   * Milliseconds a reading of the tables is reused. The gauges are read when metrics are
   * collected, with `counts()`, `blockedGroupCounts()` and the heads of `blockedGroups()`: at most
   * once per interval, however often (and by however many collectors) they are read. Default 15000.
   */
  interval?: number;
  /** Most blocked groups counted per outbox, and heads read for the oldest blocked age. Default 1000. */
  blockedGroupsLimit?: number;
}

/** What {@link registerOutboxerMetrics} returns: `close()` unsubscribes and removes the metrics from the registry. */
export interface PrometheusMetrics {
  close(): void;
}

/**
 * Registers outboxer's metrics in a prom-client registry: gauges read from the database at scrape
 * time (`outboxer_messages_pending`, `outboxer_messages_dead`, `outboxer_groups_blocked`…) and
 * counters and histograms fed by the `outboxer:*` events of this process
 * (`outboxer_messages_delivered_total`, `outboxer_batch_duration_seconds`…), each labelled
 * `outbox`. The names are those an OpenTelemetry Prometheus exporter gives the metrics of
 * `outboxer/opentelemetry`, so dashboards and alerts work with either. See docs/operations.md.
 *
 * @example
 * import { Registry } from 'prom-client';
 * import { registerOutboxerMetrics } from 'outboxer/prometheus';
 * const registry = new Registry();
 * const metrics = registerOutboxerMetrics(registry, outboxer, { outboxes: ['orders'] });
 * // GET /metrics: res.end(await registry.metrics());
 */
export function registerOutboxerMetrics(
  registry: Registry,
  outboxer: ObservedOutboxer,
  options: PrometheusMetricsOptions,
): PrometheusMetrics {
  const reader = new OutboxStateReader(outboxer, options);
  const registered: string[] = [];
  const register = <T>(definition: MetricDefinition, make: () => T): T => {
    const existing = registry.getSingleMetric(definition.prometheus);
    if (existing !== undefined) {
      for (const name of registered) registry.removeSingleMetric(name);
      throw new OutboxerError(
        'INVALID_STATE',
        `The registry already has a metric named ${definition.prometheus}: register outboxer's metrics once per registry, with every outbox in options.outboxes.`,
      );
    }
    const metric = make();
    registered.push(definition.prometheus);
    return metric;
  };

  /** A gauge whose value is set from the outbox state whenever the registry is read. */
  const gauge = (
    definition: MetricDefinition,
    labelNames: readonly string[],
    set: (gauge: Gauge<string>, state: OutboxState) => void,
  ): void => {
    register(
      definition,
      () =>
        new Gauge({
          name: definition.prometheus,
          help: definition.description,
          labelNames: ['outbox', ...labelNames],
          registers: [registry],
          async collect() {
            const states = await reader.read();
            this.reset(); // an outbox that could not be read goes absent, not stale
            for (const state of states) set(this, state);
          },
        }),
    );
  };
  gauge(GAUGES.pending, [], (g, s) => g.set({ outbox: s.outbox }, s.counts.pending));
  gauge(GAUGES.dead, [], (g, s) => g.set({ outbox: s.outbox }, s.counts.dead));
  gauge(GAUGES.orphaned, [], (g, s) => g.set({ outbox: s.outbox }, s.counts.orphaned));
  gauge(GAUGES.oldestPendingAge, [], (g, s) => g.set({ outbox: s.outbox }, s.oldestPendingAge));
  gauge(GAUGES.blockedGroups, ['parked'], (g, s) => {
    g.set({ outbox: s.outbox, parked: 'false' }, s.retryingGroups);
    g.set({ outbox: s.outbox, parked: 'true' }, s.parkedGroups);
  });
  gauge(GAUGES.oldestBlockedAge, [], (g, s) => g.set({ outbox: s.outbox }, s.oldestBlockedAge));
  gauge(GAUGES.relaySeenAge, [], (g, s) => {
    if (s.relaySeenAge !== undefined) g.set({ outbox: s.outbox }, s.relaySeenAge);
  });

  const counter = (definition: MetricDefinition): Counter<string> =>
    register(
      definition,
      () =>
        new Counter({
          // prom-client appends nothing: the definition's name already ends in _total.
          name: definition.prometheus,
          help: definition.description,
          labelNames: ['outbox'],
          registers: [registry],
        }),
    );
  const histogram = (definition: MetricDefinition, buckets: readonly number[]): Histogram<string> =>
    register(
      definition,
      () =>
        new Histogram({
          name: definition.prometheus,
          help: definition.description,
          labelNames: ['outbox'],
          buckets: [...buckets],
          registers: [registry],
        }),
    );
  const delivered = counter(EVENT_METRICS.delivered);
  const retried = counter(EVENT_METRICS.retried);
  const deadLettered = counter(EVENT_METRICS.deadLettered);
  const errors = counter(EVENT_METRICS.errors);
  const batchDuration = histogram(EVENT_METRICS.batchDuration, BATCH_DURATION_BUCKETS);
  const batchSize = histogram(EVENT_METRICS.batchSize, BATCH_SIZE_BUCKETS);
  // Every outbox starts at 0, so rate() and increase() see the first event.
  for (const outbox of reader.outboxNames) {
    for (const c of [delivered, retried, deadLettered, errors]) c.inc({ outbox }, 0);
  }

  const unsubscribe = subscribeDeliveryEvents(outboxer.settings.name, new Set(reader.outboxNames), {
    batchStop(event) {
      const outbox = { outbox: event.outbox };
      delivered.inc(outbox, event.delivered);
      batchDuration.observe(outbox, event.duration / 1000);
      batchSize.observe(outbox, event.size);
    },
    retry: (event) => retried.inc({ outbox: event.outbox }),
    dead: (event) => deadLettered.inc({ outbox: event.outbox }),
    error: (event) => errors.inc({ outbox: event.outbox }),
  });

  return {
    close() {
      unsubscribe();
      for (const name of registered) registry.removeSingleMetric(name);
      registered.length = 0;
    },
  };
}
