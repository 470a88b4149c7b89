/**
 * The webhook relay's answers to the receiver's statuses against a real HTTP receiver: which are
 * delivered, retried or refused for good, Retry-After, and retries with the same message id.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { DeliveryError, Outboxer, PermanentError } from 'outboxer';
import { verifyWebhook, webhookRelay, type WebhookRelayOptions } from 'outboxer/webhook';
import { sqliteFixture } from '../support/databases.js';
import { closedPort } from '../support/tcp-proxy.js';
import { noContent, Receiver, newSecret, envelope, deliver, errorOf } from './webhook-receiver.js';

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

  describe('status handling', () => {
    const relay = () => webhookRelay({ url: receiver.url(), retryStatuses: [409] });

    test.each([200, 201, 202, 204, 299])('%i is delivered', async (status) => {
      receiver.reply = (_hit, res) => void res.writeHead(status).end('ok');
      expect(await deliver(relay(), [envelope()])).toEqual([{ ok: true }]);
    });

    test.each([400, 401, 403, 404, 410, 413, 422])(
      '%i is a PermanentError with the status and the response body',
      async (status) => {
        receiver.reply = (_hit, res) =>
          void res.writeHead(status, { 'retry-after': '30' }).end(JSON.stringify({ error: `no ${status}` }));
        const error = errorOf((await deliver(relay(), [envelope()]))[0]);
        expect(error).toBeInstanceOf(PermanentError);
        expect(error.message).toContain(`HTTP ${status}`);
        expect(error.message).toContain(`no ${status}`);
        expect((error as PermanentError).retryAfter).toBeUndefined();
      },
    );

    test.each([408, 409, 429, 500, 502, 503, 504])('%i is retryable', async (status) => {
      receiver.reply = (_hit, res) => void res.writeHead(status).end('busy');
      const error = errorOf((await deliver(relay(), [envelope()]))[0]);
      expect(error).toBeInstanceOf(DeliveryError);
      expect((error as DeliveryError).permanent).toBe(false);
      expect(error.message).toContain(`HTTP ${status}`);
    });

    test.each([301, 302, 303, 307, 308])(
      '%i is a PermanentError: redirects are not followed',
      async (status) => {
        receiver.reply = (hit, res) =>
          void (hit.path === '/hook'
            ? res.writeHead(status, { location: '/moved?token=abc123' }).end()
            : res.writeHead(204).end());
        const error = errorOf((await deliver(relay(), [envelope()]))[0]);
        expect(error).toBeInstanceOf(PermanentError);
        expect(error.message).toContain(`redirected with HTTP ${status}`);
        expect(error.message).toContain(`${receiver.url('/moved')}?…`);
        expect(error.message).not.toContain('abc123');
        expect(receiver.hits.map((h) => h.path)).toEqual(['/hook']);
      },
    );

    test('a long response body is cut in the message', async () => {
      receiver.reply = (_hit, res) => void res.writeHead(400).end('x'.repeat(100_000));
      const error = errorOf((await deliver(relay(), [envelope()]))[0]);
      expect(error.message.length).toBeLessThan(500);
      expect(error.message).toContain('x…');
    });

    test('network errors are retryable and say what happened', async () => {
      const error = errorOf(
        (
          await deliver(webhookRelay({ url: `http://127.0.0.1:${await closedPort()}/hook` }), [envelope()])
        )[0],
      );
      expect(error).toBeInstanceOf(DeliveryError);
      expect((error as DeliveryError).permanent).toBe(false);
      expect(error.message).toMatch(/failed: fetch failed \(.*ECONNREFUSED/);
    });
  });

  describe('Retry-After', () => {
    const relay = (options: Partial<WebhookRelayOptions> = {}) =>
      webhookRelay({ url: receiver.url(), ...options });
    const retryAfterOf = async (value: string, options: Partial<WebhookRelayOptions> = {}, status = 503) => {
      receiver.reply = (_hit, res) => void res.writeHead(status, { 'retry-after': value }).end();
      return (errorOf((await deliver(relay(options), [envelope()]))[0]) as DeliveryError).retryAfter;
    };

    test('seconds and HTTP-dates become retryAfter in milliseconds, on 503 and 429', async () => {
      expect(await retryAfterOf('120')).toBe(120_000);
      expect(await retryAfterOf('7', {}, 429)).toBe(7_000);
      const date = await retryAfterOf(new Date(Date.now() + 300_000).toUTCString());
      expect(date).toBeGreaterThan(298_000);
      expect(date).toBeLessThanOrEqual(300_000);
    });

    test('is capped by maxRetryAfter, ignored when 0, malformed, zero or past', async () => {
      expect(await retryAfterOf('86400')).toBe(3_600_000);
      expect(await retryAfterOf('86400', { maxRetryAfter: 60_000 })).toBe(60_000);
      expect(await retryAfterOf('120', { maxRetryAfter: 0 })).toBeUndefined();
      for (const value of ['soon', '1.5', '-5', '0', '12 34', new Date(Date.now() - 60_000).toUTCString()]) {
        expect(await retryAfterOf(value)).toBeUndefined();
      }
    });

    describe('through the outbox', () => {
      const fixture = sqliteFixture();
      afterAll(() => fixture.close());
      let table = 0;

      async function attemptOnce(options: Partial<WebhookRelayOptions>) {
        const outboxer = new Outboxer({
          database: fixture.database,
          outboxes: {
            events: {
              relay: relay(options),
              table: `retry_after_${table++}`,
              backoff: { min: 1000, max: 2000 },
              maxAttempts: 5,
            },
          },
          testing: 'manual',
        });
        await outboxer.migrate();
        fixture.db.transaction(() => outboxer.publish(fixture.db, 'events', { n: 1 }, { groupKey: 'g' }))();
        const started = Date.now();
        await outboxer.drain('events', { maxRounds: 1 });
        const [pending] = await outboxer.listPending('events');
        const [dead] = await outboxer.listDead('events');
        await outboxer.close();
        return { pending, dead, started };
      }

      test("the next attempt is scheduled at the receiver's Retry-After", async () => {
        receiver.reply = (_hit, res) => void res.writeHead(503, { 'retry-after': '120' }).end('maintenance');
        const { pending, started } = await attemptOnce({});
        expect(pending!.attempts).toBe(1);
        expect(pending!.lastError).toContain('HTTP 503');
        expect(pending!.lastError).toContain('maintenance');
        const delay = pending!.nextAttemptAt!.getTime() - started;
        expect(delay).toBeGreaterThan(119_000);
        expect(delay).toBeLessThan(125_000);
      });

      test('without Retry-After the outbox backoff applies', async () => {
        receiver.reply = (_hit, res) => void res.writeHead(503).end();
        const { pending, started } = await attemptOnce({});
        const delay = pending!.nextAttemptAt!.getTime() - started;
        expect(delay).toBeGreaterThan(500);
        expect(delay).toBeLessThan(5_000);
      });

      test('a 4xx goes dead at once (with a finite maxAttempts), its reason recorded', async () => {
        receiver.reply = (_hit, res) => void res.writeHead(422).end('{"error":"amount must be positive"}');
        const { pending, dead } = await attemptOnce({});
        expect(pending).toBeUndefined();
        expect(dead!.lastError).toMatch(
          /PermanentError: .*HTTP 422 Unprocessable Entity.*amount must be positive/,
        );
      });
    });
  });

  describe('retries and deduplication', () => {
    const fixture = sqliteFixture();
    afterAll(() => fixture.close());

    test('webhook-id stays the same on every attempt; each attempt is freshly timestamped and signed', async () => {
      const secret = newSecret();
      let calls = 0;
      receiver.reply = (_hit, res) => void res.writeHead(calls++ < 2 ? 500 : 204).end();
      const outboxer = new Outboxer({
        database: fixture.database,
        outboxes: { events: { relay: webhookRelay({ url: receiver.url(), secret }), table: 'dedupe' } },
        testing: 'manual',
      });
      await outboxer.migrate();
      const id = fixture.db.transaction(() =>
        outboxer.publish(fixture.db, 'events', { n: 1 }, { groupKey: 'g' }),
      )();
      const result = await outboxer.drain('events');
      await outboxer.close();
      expect(result.delivered.map((m) => m.id)).toEqual([id]);
      expect(receiver.header('webhook-id')).toEqual([String(id), String(id), String(id)]);
      for (const hit of receiver.hits)
        expect(verifyWebhook(secret, hit.headers, hit.body).id).toBe(String(id));
      expect(new Set(receiver.hits.map((h) => h.body)).size).toBe(1); // the body is the same: only the attempt's headers change
    });
  });
});
