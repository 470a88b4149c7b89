import { metrics, type MeterProvider, type ObservableGauge } from '@opentelemetry/api';
import { subscribeDeliveryEvents } from './delivery-events.js';
import {
  BATCH_DURATION_BUCKETS,
  BATCH_SIZE_BUCKETS,
  EVENT_METRICS,
  GAUGES,
  type MetricDefinition,
} from './metric-definitions.js';
import type { OutboxerInstrumentation } from './opentelemetry-tracing.js';
import { OutboxStateReader, type ObservedOutboxer } from './outbox-state.js';

export interface OutboxerMetricsOptions {
  /** The outboxes to report, by name. */
  outboxes: readonly string[];
  /** Where the instruments are created. Default: the global meter provider (`metrics.getMeterProvider()`). */
  meterProvider?: MeterProvider;
  /**
   * Milliseconds a reading of the tables is reused. The gauges are read when metrics are
   * collected, with `counts()`, `blockedGroupCounts()` and the heads of `blockedGroups()`: at most
   * once per interval, however often (and by however many collectors) they are read. Default 15000.
   */
  interval?: number;
  /** Most blocked groups counted per outbox, and heads read for the oldest blocked age. Default 1000. */
  blockedGroupsLimit?: number;
}

/**
 * OpenTelemetry metrics of an outboxer instance: gauges read from the database when metrics are
 * collected (pending, dead, orphaned, oldest pending age, blocked groups, oldest blocked age, last
 * relay heartbeat), and counters and histograms fed by the `outboxer:*` events of this process
 * (delivered, retried, dead-lettered, errors, batch duration and size). Every metric has the
 * attribute `outbox`. See docs/opentelemetry.md for the list.
 *
 * Gauges describe the outbox (every node reports the same value: aggregate with `max`); counters
 * describe this process (aggregate with `sum`). A publish-only node (`relay: false`) can report
 * the gauges; only relaying nodes count deliveries.
 *
 * @example
 * import { outboxerMetrics } from 'outboxer/opentelemetry';
 * const telemetry = outboxerMetrics(outboxer, { outboxes: ['orders'] }); // after the SDK started
 * // on shutdown: telemetry.close();
 */
export function outboxerMetrics(
  outboxer: ObservedOutboxer,
  options: OutboxerMetricsOptions,
): OutboxerInstrumentation {
  const reader = new OutboxStateReader(outboxer, options);
  const provider = options.meterProvider ?? metrics.getMeterProvider();
  const meter = provider.getMeter('outboxer');
  const gauge = (definition: MetricDefinition): ObservableGauge =>
    meter.createObservableGauge(definition.otel, {
      unit: definition.unit,
      description: definition.description,
    });
  const gauges = {
    pending: gauge(GAUGES.pending),
    dead: gauge(GAUGES.dead),
    orphaned: gauge(GAUGES.orphaned),
    oldestPendingAge: gauge(GAUGES.oldestPendingAge),
    blockedGroups: gauge(GAUGES.blockedGroups),
    oldestBlockedAge: gauge(GAUGES.oldestBlockedAge),
    relaySeenAge: gauge(GAUGES.relaySeenAge),
  };
  const observe = async (result: {
    observe(gauge: ObservableGauge, value: number, attributes: Record<string, string>): void;
  }): Promise<void> => {
    for (const state of await reader.read()) {
      const outbox = { outbox: state.outbox };
      result.observe(gauges.pending, state.counts.pending, outbox);
      result.observe(gauges.dead, state.counts.dead, outbox);
      result.observe(gauges.orphaned, state.counts.orphaned, outbox);
      result.observe(gauges.oldestPendingAge, state.oldestPendingAge, outbox);
      result.observe(gauges.blockedGroups, state.retryingGroups, { ...outbox, parked: 'false' });
      result.observe(gauges.blockedGroups, state.parkedGroups, { ...outbox, parked: 'true' });
      result.observe(gauges.oldestBlockedAge, state.oldestBlockedAge, outbox);
      if (state.relaySeenAge !== undefined) result.observe(gauges.relaySeenAge, state.relaySeenAge, outbox);
    }
  };
  meter.addBatchObservableCallback(observe, Object.values(gauges));

  const counter = (definition: MetricDefinition) =>
    meter.createCounter(definition.otel, { unit: definition.unit, description: definition.description });
  const delivered = counter(EVENT_METRICS.delivered);
  const retried = counter(EVENT_METRICS.retried);
  const deadLettered = counter(EVENT_METRICS.deadLettered);
  const errors = counter(EVENT_METRICS.errors);
  const batchDuration = meter.createHistogram(EVENT_METRICS.batchDuration.otel, {
    unit: EVENT_METRICS.batchDuration.unit,
    description: EVENT_METRICS.batchDuration.description,
    advice: { explicitBucketBoundaries: [...BATCH_DURATION_BUCKETS] },
  });
  const batchSize = meter.createHistogram(EVENT_METRICS.batchSize.otel, {
    unit: EVENT_METRICS.batchSize.unit,
    description: EVENT_METRICS.batchSize.description,
    advice: { explicitBucketBoundaries: [...BATCH_SIZE_BUCKETS] },
  });
  const unsubscribe = subscribeDeliveryEvents(outboxer.settings.name, new Set(reader.outboxNames), {
    batchStop(event) {
      const outbox = { outbox: event.outbox };
      delivered.add(event.delivered, outbox);
      batchDuration.record(event.duration / 1000, outbox);
      batchSize.record(event.size, outbox);
    },
    retry: (event) => retried.add(1, { outbox: event.outbox }),
    dead: (event) => deadLettered.add(1, { outbox: event.outbox }),
    error: (event) => errors.add(1, { outbox: event.outbox }),
  });

  return {
    close() {
      unsubscribe();
      meter.removeBatchObservableCallback(observe, Object.values(gauges));
    },
  };
}
