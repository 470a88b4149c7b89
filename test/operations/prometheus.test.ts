/**
 * outboxer/prometheus: metric values in a prom-client registry match known states; the names are
 * those the OpenTelemetry integration's metrics get in Prometheus.
 */
import Database from 'better-sqlite3';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { Outboxer, isOutboxerError } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { registerOutboxerMetrics } from '../../src/integrations/prometheus/index.js';
import {
  postgresAndSqlite as fixtures,
  type PostgresOrSqliteFixture as Fixture,
} from '../support/databases.js';
import { knownOutboxes, produceKnownState } from './support.js';

type Json = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

function valueOf(metrics: Json, name: string, labels: Record<string, string>): number | undefined {
  const metric = metrics.find((m) => m.name === name);
  const sample = (metric?.values ?? []).find(
    (v) =>
      (v as { metricName?: string }).metricName === undefined &&
      Object.entries(labels).every(([k, l]) => v.labels[k] === l),
  );
  return sample?.value;
}

describe.each(fixtures)('on $name', ({ make }) => {
  let fixture: Fixture;
  beforeAll(async () => {
    fixture = await make();
  });
  afterAll(() => fixture.close());

  test('metrics match a known state, and the text exposition uses the documented names', async () => {
    const outboxer = knownOutboxes(fixture);
    const registry = new Registry();
    const metrics = registerOutboxerMetrics(registry, outboxer, {
      outboxes: ['known', 'strict'],
      interval: 0,
    });
    try {
      const started = Date.now();
      await produceKnownState(fixture, outboxer);
      const json = await registry.getMetricsAsJSON();
      const elapsed = (Date.now() - started) / 1000 + 1;
      const known = { outbox: 'known' };
      const strict = { outbox: 'strict' };

      expect(valueOf(json, 'outboxer_messages_delivered_total', known)).toBe(2);
      expect(valueOf(json, 'outboxer_messages_retried_total', known)).toBe(2);
      expect(valueOf(json, 'outboxer_messages_dead_lettered_total', known)).toBe(2);
      expect(valueOf(json, 'outboxer_errors_total', known)).toBe(0);
      expect(valueOf(json, 'outboxer_messages_pending', known)).toBe(2);
      expect(valueOf(json, 'outboxer_messages_dead', known)).toBe(2);
      expect(valueOf(json, 'outboxer_messages_orphaned', known)).toBe(0);
      expect(valueOf(json, 'outboxer_groups_blocked', { ...known, parked: 'true' })).toBe(1);
      expect(valueOf(json, 'outboxer_groups_blocked', { ...known, parked: 'false' })).toBe(0);

      expect(valueOf(json, 'outboxer_messages_delivered_total', strict)).toBe(0);
      expect(valueOf(json, 'outboxer_messages_retried_total', strict)).toBe(2);
      expect(valueOf(json, 'outboxer_messages_dead_lettered_total', strict)).toBe(0);
      expect(valueOf(json, 'outboxer_messages_pending', strict)).toBe(2);
      expect(valueOf(json, 'outboxer_groups_blocked', { ...strict, parked: 'false' })).toBe(1);

      for (const outbox of [known, strict]) {
        const age = valueOf(json, 'outboxer_messages_oldest_pending_age_seconds', outbox)!;
        expect(age).toBeGreaterThanOrEqual(0);
        expect(age).toBeLessThan(elapsed);
        const blocked = valueOf(json, 'outboxer_groups_oldest_blocked_age_seconds', outbox)!;
        expect(blocked).toBeLessThan(elapsed);
        expect(valueOf(json, 'outboxer_relay_last_seen_age_seconds', outbox)).toBeUndefined();
      }

      const text = await registry.metrics();
      expect(text).toContain('# TYPE outboxer_batch_duration_seconds histogram');
      expect(text).toContain('outboxer_batch_size_sum{outbox="known"} 8');
      expect(text).toMatch(/outboxer_batch_duration_seconds_count\{outbox="known"\} [2-9]/);
      expect(text).toContain('outboxer_messages_pending{outbox="strict"} 2');

      // The state changes; the next scrape follows it.
      await outboxer.retryDead('known');
      await outboxer.drain('known');
      const after = await registry.getMetricsAsJSON();
      expect(valueOf(after, 'outboxer_messages_dead', known)).toBe(2); // the poison ones died again
      expect(valueOf(after, 'outboxer_messages_dead_lettered_total', known)).toBe(4);
    } finally {
      metrics.close();
      await outboxer.close();
    }
    expect(await registry.getMetricsAsJSON()).toEqual([]); // close() removed everything
  });

  test('the tables are read at most once per interval, whatever the number of gauges and scrapes', async () => {
    const outboxer = knownOutboxes(fixture);
    await outboxer.migrate();
    const counts = vi.spyOn(outboxer, 'counts');
    const registry = new Registry();
    const metrics = registerOutboxerMetrics(registry, outboxer, { outboxes: ['known'], interval: 60_000 });
    try {
      await Promise.all([registry.metrics(), registry.metrics()]);
      await registry.metrics();
      expect(counts).toHaveBeenCalledTimes(1);
    } finally {
      metrics.close();
      await outboxer.close();
    }
  });
});

test('registering twice in one registry is refused and leaves the first registration intact', () => {
  const outboxer = new Outboxer({
    database: betterSqlite3(new Database(':memory:')),
    relay: false,
    outboxes: { orders: {} },
  });
  const registry = new Registry();
  const first = registerOutboxerMetrics(registry, outboxer, { outboxes: ['orders'] });
  const count = registry.getMetricsAsArray().length;
  let error: unknown;
  try {
    registerOutboxerMetrics(registry, outboxer, { outboxes: ['orders'] });
  } catch (thrown) {
    error = thrown;
  }
  expect(isOutboxerError(error) && error.code).toBe('INVALID_STATE');
  expect(registry.getMetricsAsArray().length).toBe(count);
  first.close();
  expect(registry.getMetricsAsArray()).toEqual([]);
  expect(() => registerOutboxerMetrics(registry, outboxer, { outboxes: ['nope'] })).toThrow(/Unknown outbox/);
});
