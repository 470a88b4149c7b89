/**
 * The metrics outboxer publishes, named once for both integrations: `otel` is the OpenTelemetry
 * instrument name, `prometheus` the name prom-client registers, which is what an OpenTelemetry
 * Prometheus exporter makes of `otel` and its unit (dots to underscores, `_seconds` for a unit of
 * `s`, `_total` for counters), so the same PromQL works on both. Shared by `outboxer/opentelemetry`
 * and `outboxer/prometheus`; it imports neither.
 */

export interface MetricDefinition {
  readonly otel: string;
  readonly prometheus: string;
  readonly unit: string;
  readonly description: string;
}

function define(otel: string, unit: string, description: string, suffix = ''): MetricDefinition {
  const base = otel.replace(/\./g, '_');
  const unitSuffix = unit === 's' ? '_seconds' : '';
  return { otel, prometheus: `${base}${unitSuffix}${suffix}`, unit, description };
}

/** Gauges, read from the database by `counts()`, `blockedGroupCounts()` and `blockedGroups()`; label `outbox`. */
export const GAUGES = {
  pending: define(
    'outboxer.messages.pending',
    '{message}',
    'Messages waiting for delivery: ready, retrying, or held behind a failing message of their group.',
  ),
  dead: define('outboxer.messages.dead', '{message}', 'Dead messages, waiting for retryDead() or discard().'),
  orphaned: define(
    'outboxer.messages.orphaned',
    '{message}',
    'Pending messages in partitions no worker reads (partitions was lowered on a live backlog).',
  ),
  oldestPendingAge: define(
    'outboxer.messages.oldest_pending_age',
    's',
    'Seconds since the oldest pending message was published; 0 when nothing is pending.',
  ),
  blockedGroups: define(
    'outboxer.groups.blocked',
    '{group}',
    'Groups held back by their head: label parked="false" for a retrying head, "true" for a dead one (onDead: park). Counted up to blockedGroupsLimit.',
  ),
  oldestBlockedAge: define(
    'outboxer.groups.oldest_blocked_age',
    's',
    'Seconds since the oldest blocking head first failed; 0 when no group is blocked.',
  ),
  relaySeenAge: define(
    'outboxer.relay.last_seen_age',
    's',
    'Seconds since any relaying node last sent a heartbeat for the outbox; absent when none ever did.',
  ),
} as const;

/** Counters and histograms, from the `outboxer:*` diagnostics_channel events of this process; label `outbox`. */
export const EVENT_METRICS = {
  delivered: define(
    'outboxer.messages.delivered',
    '{message}',
    'Messages the relay confirmed (a batch whose acknowledgement then fails is delivered and counted again).',
    '_total',
  ),
  retried: define(
    'outboxer.messages.retried',
    '{message}',
    'Failed deliveries scheduled for another attempt.',
    '_total',
  ),
  deadLettered: define(
    'outboxer.messages.dead_lettered',
    '{message}',
    'Messages that went dead (maxAttempts, maxRetryDuration or a permanent error).',
    '_total',
  ),
  errors: define(
    'outboxer.errors',
    '{error}',
    'Relay rounds or coordination steps that failed (database down…) and are retried.',
    '_total',
  ),
  batchDuration: define(
    'outboxer.batch.duration',
    's',
    'Seconds the relay took to deliver a batch (the settle that follows is one short transaction).',
  ),
  batchSize: define('outboxer.batch.size', '{message}', 'Messages per batch handed to the relay.'),
} as const;

/** Bucket boundaries of `outboxer.batch.duration`, in seconds: 5 ms to 5 min. */
export const BATCH_DURATION_BUCKETS: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
];

/** Bucket boundaries of `outboxer.batch.size`. */
export const BATCH_SIZE_BUCKETS: readonly number[] = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000];
