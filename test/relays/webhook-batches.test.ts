/**
 * The webhook relay's batches against a real HTTP receiver: ordering and partial failure
 * (a failed group's later messages SKIPPED), concurrency, timeouts and abandoning a batch.
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { DeliveryError, Outboxer, SKIPPED } from 'outboxer';
import { webhookRelay } from 'outboxer/webhook';
import { sqliteFixture } from '../support/databases.js';
import { orderViolations, waitFor } from './contract.js';
import { noContent, Receiver, envelope, deliver, errorOf, type Reply } from './webhook-receiver.js';

describe('webhook relay', () => {
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await Receiver.start();
  });
  afterEach(() => {
    receiver.hits.length = 0;
    receiver.reply = noContent;
  });
  afterAll(() => receiver.stop());

  describe('ordering and partial failure', () => {
    test('after a failure the rest of that group is not sent (SKIPPED); other groups and unordered messages go on', async () => {
      receiver.reply = (hit, res) =>
        void res
          .writeHead((JSON.parse(hit.body) as { data: { fail?: boolean } }).data.fail ? 500 : 204)
          .end();
      const batch = [
        envelope({ groupKey: 'a', payload: { fail: true } }),
        envelope({ groupKey: 'b' }),
        envelope({ groupKey: 'a' }),
        envelope({ groupKey: null, payload: { fail: true } }),
        envelope({ groupKey: null }),
        envelope({ groupKey: 'b' }),
        envelope({ groupKey: 'a' }),
      ];
      const outcomes = await deliver(webhookRelay({ url: receiver.url() }), batch);
      expect(outcomes.map((o) => (o.ok ? 'ok' : o.error === SKIPPED ? 'skipped' : 'failed'))).toEqual([
        'failed',
        'ok',
        'skipped',
        'failed',
        'ok',
        'ok',
        'skipped',
      ]);
      expect(receiver.header('webhook-id')).toEqual(
        [batch[0], batch[1], batch[3], batch[4], batch[5]].map((m) => String(m!.id)),
      );
    });

    test("'total' ordering: the first failure holds back everything after it", async () => {
      receiver.reply = (_hit, res) => void res.writeHead(receiver.hits.length === 2 ? 503 : 204).end();
      const outcomes = await deliver(
        webhookRelay({ url: receiver.url(), concurrency: 8 }),
        [
          envelope({ groupKey: 'a' }),
          envelope({ groupKey: 'b' }),
          envelope({ groupKey: null }),
          envelope({ groupKey: 'c' }),
        ],
        { ordering: 'total' },
      );
      expect(outcomes.map((o) => (o.ok ? 'ok' : o.error === SKIPPED ? 'skipped' : 'failed'))).toEqual([
        'ok',
        'failed',
        'skipped',
        'skipped',
      ]);
    });

    test('concurrency overlaps different groups, never two requests of one group, and keeps per-group order', async () => {
      const fixture = sqliteFixture();
      const inFlight = new Map<string, number>();
      const overlaps: string[] = [];
      let current = 0;
      let peak = 0;
      receiver.reply = async (hit, res) => {
        const group = String(hit.headers['outboxer-group-key'] ?? `none:${hit.headers['webhook-id']}`);
        if (inFlight.has(group))
          overlaps.push(`${group}: ${hit.headers['webhook-id']} while ${inFlight.get(group)} in flight`);
        inFlight.set(group, Number(hit.headers['webhook-id']));
        peak = Math.max(peak, ++current);
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 8));
        current -= 1;
        inFlight.delete(group);
        res.writeHead(204).end();
      };
      const outboxer = new Outboxer({
        database: fixture.database,
        outboxes: {
          events: {
            relay: webhookRelay({ url: receiver.url(), concurrency: 6 }),
            table: 'concurrency',
            pollInterval: 50,
          },
        },
      });
      try {
        await outboxer.migrate();
        await outboxer.start();
        fixture.db.transaction(() => {
          outboxer.publishMany(
            fixture.db,
            Array.from({ length: 400 }, (_, i) => ({
              outbox: 'events',
              payload: { i },
              groupKey: i % 10 === 9 ? null : `g${i % 9}`,
            })),
          );
        })();
        await waitFor(
          async () => (await outboxer.counts('events')).pending === 0,
          30_000,
          'the outbox to drain',
        );
      } finally {
        await outboxer.stop();
        await fixture.close();
      }
      const received = receiver.hits.map((hit) => {
        const groupKey = hit.headers['outboxer-group-key'] as string | undefined;
        return {
          id: Number(hit.headers['webhook-id']),
          groupKey: groupKey === undefined ? null : decodeURIComponent(groupKey),
          payload: null,
        };
      });
      expect(received).toHaveLength(400);
      expect(overlaps).toEqual([]);
      expect(orderViolations(received)).toEqual([]);
      expect(peak).toBeGreaterThan(1);
      expect(peak).toBeLessThanOrEqual(6);
    });
  });

  describe('timeouts and abandoning a batch', () => {
    const hang: Reply = () => undefined; // never answers; the receiver's stop() cuts the socket

    test('a request that gets no answer in time fails retryably, naming the timeout', async () => {
      receiver.reply = hang;
      const error = errorOf(
        (await deliver(webhookRelay({ url: receiver.url(), timeout: 300 }), [envelope()]))[0],
      );
      expect(error).toBeInstanceOf(DeliveryError);
      expect((error as DeliveryError).permanent).toBe(false);
      expect(error.message).toContain('timed out after 300 ms');
    });

    test('the timeout covers a response body that never ends', async () => {
      receiver.reply = (_hit, res) => {
        res.writeHead(500);
        res.write('partial');
      };
      const error = errorOf(
        (await deliver(webhookRelay({ url: receiver.url(), timeout: 300 }), [envelope()]))[0],
      );
      expect(error.message).toContain('HTTP 500');
    });

    test('the timeout holds through garbage collections while a body never ends, and the connection is closed', async () => {
      // fetch, AbortSignal.timeout() and AbortSignal.any() hold their signals weakly: with a
      // collection mid-body, the relay used to wait for that body for good.
      v8.setFlagsFromString('--expose-gc');
      const gc = vm.runInNewContext('gc') as () => void;
      receiver.reply = (_hit, res) => {
        res.writeHead(500);
        res.write('partial');
      };
      const collecting = setInterval(gc, 20);
      try {
        for (let round = 0; round < 3; round += 1) {
          const error = errorOf(
            (await deliver(webhookRelay({ url: receiver.url(), timeout: 300 }), [envelope()]))[0],
          );
          expect(error.message).toContain('HTTP 500');
        }
      } finally {
        clearInterval(collecting);
      }
      await waitFor(
        () => receiver.openConnections() === 0,
        5_000,
        'the relay to close the connections of the bodies it gave up on',
      );
    });

    test('context.signal stops the request in flight; the unsent messages are SKIPPED (no attempt counted)', async () => {
      receiver.reply = hang;
      const controller = new AbortController();
      setTimeout(() => controller.abort(new Error('outboxer is stopping')), 200);
      const outcomes = await deliver(
        webhookRelay({ url: receiver.url() }),
        [envelope({ groupKey: 'a' }), envelope({ groupKey: 'b' }), envelope({ groupKey: null })],
        { signal: controller.signal },
      );
      expect(errorOf(outcomes[0]).message).toContain('abandoned: outboxer is stopping');
      expect(outcomes.slice(1)).toEqual([
        { ok: false, error: SKIPPED },
        { ok: false, error: SKIPPED },
      ]);
      expect(receiver.hits).toHaveLength(1);
    });
  });
});
