import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { orderingKey, SKIPPED, type DeliveryOutcome, type Envelope, type Ordering } from 'outboxer';
import { webhookRelay, type WebhookFetch } from 'outboxer/webhook';
import { deliverBatch, makeContext, makeEnvelope } from '../support/envelopes.js';

// The order rule under every interleaving fast-check can think of: random groups, latencies,
// failures, concurrency and ordering modes. Requests go through the relay's public `fetch` option
// to an in-memory endpoint, so that hundreds of batches run in seconds; webhook-batches.test.ts
// checks the same rule against a real HTTP server.

interface Spec {
  readonly key: string | null;
  readonly fail: boolean;
  readonly latency: number;
}

const specs = fc.array(
  fc.record({
    key: fc.option(fc.constantFrom('a', 'b', 'c', 'd', 'e'), { nil: null, freq: 4 }),
    fail: fc.integer({ min: 0, max: 9 }).map((n) => n < 2), // one in five fails
    latency: fc.integer({ min: 0, max: 4 }),
  }),
  { minLength: 1, maxLength: 40 },
);

function envelopes(list: readonly Spec[]): Envelope[] {
  return list.map((spec, i) => makeEnvelope({ id: i + 1, groupKey: spec.key, payload: null }));
}

/** What deliverEach would report: the outcomes do not depend on timing, only on which messages fail. */
function expectedOutcomes(
  batch: readonly Envelope[],
  list: readonly Spec[],
  ordering: Ordering,
): Array<'ok' | 'failed' | 'skipped'> {
  const failed = new Set<string>();
  return batch.map((envelope, i) => {
    const key = orderingKey(envelope, ordering);
    if (key !== null && failed.has(key)) return 'skipped';
    if (!list[i]!.fail) return 'ok';
    if (key !== null) failed.add(key);
    return 'failed';
  });
}

const kind = (outcome: DeliveryOutcome) =>
  outcome.ok ? 'ok' : outcome.error === SKIPPED ? 'skipped' : 'failed';

describe('webhook relay ordering (property-based)', () => {
  test('one request per key at a time, in id order, nothing of a key after its failure, at most `concurrency` in flight', async () => {
    await fc.assert(
      fc.asyncProperty(
        specs,
        fc.integer({ min: 1, max: 8 }),
        fc.constantFrom<Ordering>('group', 'total', 'none'),
        async (list, concurrency, ordering) => {
          const batch = envelopes(list);
          const started: number[] = [];
          const active = new Set<string>();
          const violations: string[] = [];
          let inFlight = 0;
          let peak = 0;
          const endpoint: WebhookFetch = async (_url, init) => {
            const id = Number(init.headers['webhook-id']);
            const key = orderingKey(batch[id - 1]!, ordering);
            if (key !== null && active.has(key))
              violations.push(`${id} started while key ${key} was in flight`);
            if (key !== null) active.add(key);
            started.push(id);
            peak = Math.max(peak, ++inFlight);
            await new Promise((resolve) => setTimeout(resolve, list[id - 1]!.latency));
            inFlight -= 1;
            if (key !== null) active.delete(key);
            return new Response(null, { status: list[id - 1]!.fail ? 503 : 204 });
          };
          const relay = webhookRelay({ url: 'http://receiver.invalid/hook', fetch: endpoint, concurrency });
          const outcomes = await deliverBatch(relay, batch, makeContext({ ordering }));

          expect(violations).toEqual([]);
          expect(peak).toBeLessThanOrEqual(concurrency);
          expect(outcomes.map(kind)).toEqual(expectedOutcomes(batch, list, ordering));
          // Exactly the messages not skipped were sent, each once.
          expect([...started].sort((x, y) => x - y)).toEqual(
            batch.filter((_, i) => kind(outcomes[i]!) !== 'skipped').map((m) => m.id),
          );
          // Per key, requests started in id order.
          const lastByKey = new Map<string, number>();
          for (const id of started) {
            const key = orderingKey(batch[id - 1]!, ordering);
            if (key === null) continue;
            expect(id).toBeGreaterThan(lastByKey.get(key) ?? 0);
            lastByKey.set(key, id);
          }
          // One at a time means exactly id order, like deliverEach.
          if (concurrency === 1) expect(started).toEqual([...started].sort((x, y) => x - y));
        },
      ),
      { numRuns: 300 },
    );
  }, 60_000);

  test('when the batch is abandoned, nothing more starts and the unsent messages are SKIPPED', async () => {
    await fc.assert(
      fc.asyncProperty(
        specs,
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 0, max: 6 }),
        async (list, concurrency, abortAfter) => {
          const batch = envelopes(list);
          const controller = new AbortController();
          const started: number[] = [];
          const endpoint: WebhookFetch = async (_url, init) => {
            started.push(Number(init.headers['webhook-id']));
            if (started.length > abortAfter) controller.abort(new Error('stopping'));
            init.signal.throwIfAborted();
            return new Response(null, { status: 204 });
          };
          const relay = webhookRelay({ url: 'http://receiver.invalid/hook', fetch: endpoint, concurrency });
          const outcomes = await deliverBatch(relay, batch, makeContext({ signal: controller.signal }));
          outcomes.forEach((outcome, i) => {
            const sent = started.includes(batch[i]!.id);
            if (!sent) expect(outcome).toEqual({ ok: false, error: SKIPPED });
          });
          if (controller.signal.aborted) expect(started.length).toBeLessThanOrEqual(abortAfter + concurrency);
        },
      ),
      { numRuns: 200 },
    );
  });
});
