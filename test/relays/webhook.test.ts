/**
 * The webhook relay against a real HTTP receiver: the relay contract suite, the request it sends
 * (Standard Webhooks body, signature and headers), secret rotation and redaction. Status codes and
 * retries are in webhook-statuses.test.ts, ordering and timeouts in webhook-batches.test.ts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { PermanentError } from 'outboxer';
import { verifyWebhook, webhookRelay } from 'outboxer/webhook';
import { closedPort } from '../support/tcp-proxy.js';
import { relayContract, type Received } from './contract.js';
import { noContent, Receiver, newSecret, envelope, deliver, errorOf } from './webhook-receiver.js';

// ---------------------------------------------------------------------------------------------
// The contract suite, sequential and with concurrency across groups.
// ---------------------------------------------------------------------------------------------

for (const concurrency of [1, 4]) {
  relayContract({
    name: `webhook (concurrency ${concurrency})`,
    keepsOrder: true,
    dedupesById: true,
    async destination() {
      const secret = newSecret();
      const receiver = await Receiver.start();
      const received: Received[] = [];
      receiver.reply = (hit, res) => {
        try {
          verifyWebhook(secret, hit.headers, hit.body);
        } catch {
          res.writeHead(401).end('bad signature');
          return;
        }
        const body = JSON.parse(hit.body) as { data: unknown };
        const id = String(hit.headers['webhook-id']);
        const groupKey = hit.headers['outboxer-group-key'];
        received.push({
          id: Number(id),
          groupKey: typeof groupKey === 'string' ? decodeURIComponent(groupKey) : null,
          payload: body.data,
          dedupeId: id,
        });
        res.writeHead(204).end();
      };
      return {
        relay: webhookRelay({ url: receiver.url(), secret, concurrency, timeout: 5000 }),
        received: async () => received,
        outage: { begin: () => receiver.stop(), end: () => receiver.restart() },
        teardown: () => receiver.stop(),
      };
    },
    async misconfigured() {
      // Nothing listens there: every attempt is refused, retryably.
      return {
        relay: webhookRelay({ url: `http://127.0.0.1:${await closedPort()}/hook`, timeout: 2000 }),
        error:
          /^DELIVERY_FAILED: Webhook POST http:\/\/127\.0\.0\.1:\d+\/hook failed: fetch failed \(connect ECONNREFUSED 127\.0\.0\.1:\d+\)$/,
      };
    },
    async refusal() {
      // A 4xx other than 408 and 429: the receiver turns the message down for good.
      const receiver = await Receiver.start();
      receiver.reply = (_hit, res) => void res.writeHead(422).end('order unknown');
      return {
        relay: webhookRelay({ url: receiver.url(), secret: newSecret(), concurrency, timeout: 5000 }),
        message: { payload: { orderId: -1 } },
        error:
          /^DELIVERY_FAILED: Webhook POST http:\/\/127\.0\.0\.1:\d+\/hook was rejected with HTTP 422.*"order unknown"/,
        teardown: () => receiver.stop(),
      };
    },
  });
}

// ---------------------------------------------------------------------------------------------
// Focused tests.
// ---------------------------------------------------------------------------------------------

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

  describe('the request', () => {
    test('one signed POST per message: Standard Webhooks body and headers, outboxer headers, message and static headers', async () => {
      const secret = newSecret();
      const relay = webhookRelay({
        url: receiver.url('/in'),
        secret,
        headers: { 'X-Api-Key': 'key-0123456789' },
      });
      const insertedAt = new Date('2026-01-02T03:04:05.678Z');
      const message = envelope({
        payload: { orderId: 42 },
        headers: { traceparent: '00-abc-def-01' },
        insertedAt,
      });
      const before = Math.floor(Date.now() / 1000);
      expect(await deliver(relay, [message])).toEqual([{ ok: true }]);
      expect(receiver.hits).toHaveLength(1);
      const hit = receiver.hits[0]!;
      expect(hit.path).toBe('/in');
      expect(JSON.parse(hit.body)).toEqual({
        type: 'order.paid',
        timestamp: '2026-01-02T03:04:05.678Z',
        data: { orderId: 42 },
      });
      expect(hit.headers).toMatchObject({
        'content-type': 'application/json',
        'webhook-id': String(message.id),
        'outboxer-id': String(message.id),
        'outboxer-outbox': 'events',
        'outboxer-type': 'order.paid',
        'outboxer-group-key': 'g1',
        traceparent: '00-abc-def-01',
        'x-api-key': 'key-0123456789',
      });
      const timestamp = Number(hit.headers['webhook-timestamp']);
      expect(timestamp).toBeGreaterThanOrEqual(before);
      expect(timestamp).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
      expect(String(hit.headers['webhook-signature'])).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
      expect(verifyWebhook(secret, hit.headers, hit.body)).toEqual({
        id: String(message.id),
        timestamp: new Date(timestamp * 1000),
      });
    });

    test('without a secret: webhook-id and webhook-timestamp, no signature', async () => {
      const relay = webhookRelay({ url: receiver.url() });
      await deliver(relay, [envelope({ type: null, groupKey: null })]);
      const hit = receiver.hits[0]!;
      expect(hit.headers['webhook-signature']).toBeUndefined();
      expect(hit.headers['webhook-id']).toBeDefined();
      expect(hit.headers['outboxer-group-key']).toBeUndefined();
      expect(JSON.parse(hit.body)).toMatchObject({ type: null, data: { n: 1 } });
    });

    test("body: 'payload' sends the payload alone; a function builds any JSON", async () => {
      await deliver(webhookRelay({ url: receiver.url(), body: 'payload' }), [
        envelope({ payload: [1, 'two'] }),
      ]);
      await deliver(
        webhookRelay({ url: receiver.url(), body: (m) => ({ event: m.type, id: m.id, order: m.payload }) }),
        [envelope({ id: 77, payload: { n: 2 } })],
      );
      expect(receiver.hits.map((h) => JSON.parse(h.body))).toEqual([
        [1, 'two'],
        { event: 'order.paid', id: 77, order: { n: 2 } },
      ]);
    });

    test('url as a function routes each message', async () => {
      const relay = webhookRelay({
        url: (m) => new URL(`/tenants/${(m.payload as { tenant: string }).tenant}`, receiver.url()),
      });
      await deliver(relay, [envelope({ payload: { tenant: 'a' } }), envelope({ payload: { tenant: 'b' } })]);
      expect(receiver.hits.map((h) => h.path)).toEqual(['/tenants/a', '/tenants/b']);
    });

    test('the relay owns webhook-* headers: a message header cannot forge a signature', async () => {
      await deliver(webhookRelay({ url: receiver.url() }), [
        envelope({ headers: { 'webhook-signature': 'v1,forged', 'Webhook-Id': 'x' } }),
      ]);
      expect(receiver.hits[0]!.headers['webhook-signature']).toBeUndefined();
      expect(receiver.hits[0]!.headers['webhook-id']).not.toBe('x');
    });

    test('a group key or type HTTP headers cannot carry is percent-encoded; decodeURIComponent gives it back', async () => {
      const groupKey = 'customer:Müller 100% 🚀';
      const type = 'commande.créée';
      expect(
        await deliver(webhookRelay({ url: receiver.url() }), [
          envelope({ groupKey, type }),
          envelope({ groupKey: 'order:42', type: 'a.b' }),
        ]),
      ).toEqual([{ ok: true }, { ok: true }]);
      expect(receiver.header('outboxer-group-key').map(decodeURIComponent)).toEqual([groupKey, 'order:42']);
      expect(receiver.header('outboxer-type').map(decodeURIComponent)).toEqual([type, 'a.b']);
      expect(receiver.header('outboxer-group-key')[1]).toBe('order:42'); // plain ASCII is sent as it is
      expect(JSON.parse(receiver.hits[0]!.body)).toMatchObject({ type }); // the body has it verbatim
    });

    test('configured headers win over message headers of the same name', async () => {
      await deliver(
        webhookRelay({ url: receiver.url(), headers: { Authorization: 'Bearer configured-token' } }),
        [envelope({ headers: { authorization: 'Bearer from-message' } })],
      );
      expect(receiver.hits[0]!.headers.authorization).toBe('Bearer configured-token');
    });

    test('a message header HTTP cannot carry is a PermanentError and nothing is sent', async () => {
      const relay = webhookRelay({ url: receiver.url() });
      const unsendable: Array<Record<string, string>> = [
        { 'x-note': 'line\nbreak' },
        { 'x-note': 'emoji 🚀' },
        { 'bad name': 'v' },
        { 'content-length': '3' },
      ];
      for (const headers of unsendable) {
        const error = errorOf((await deliver(relay, [envelope({ headers })]))[0]);
        expect(error).toBeInstanceOf(PermanentError);
        expect(error.message).toMatch(/cannot be sent over HTTP/);
      }
      expect(receiver.hits).toHaveLength(0);
    });

    test('a custom fetch is used (proxies, mTLS)', async () => {
      const urls: string[] = [];
      const relay = webhookRelay({
        url: receiver.url(),
        fetch: (url, init) => {
          urls.push(url);
          return fetch(url, init);
        },
      });
      expect(await deliver(relay, [envelope()])).toEqual([{ ok: true }]);
      expect(urls).toEqual([receiver.url()]);
    });
  });
  describe('secret rotation', () => {
    test('several secrets sign every request once each; a receiver with any one of them accepts', async () => {
      const [current, previous, unrelated] = [newSecret(), newSecret(), newSecret()];
      await deliver(webhookRelay({ url: receiver.url(), secret: [current, previous] }), [envelope()]);
      const hit = receiver.hits[0]!;
      expect(String(hit.headers['webhook-signature']).split(' ')).toHaveLength(2);
      expect(() => verifyWebhook(current, hit.headers, hit.body)).not.toThrow();
      expect(() => verifyWebhook(previous, hit.headers, hit.body)).not.toThrow();
      expect(() => verifyWebhook(unrelated, hit.headers, hit.body)).toThrow(/does not match/);
      expect(() => verifyWebhook(current, hit.headers, `${hit.body} `)).toThrow(/does not match/);
    });
  });

  describe('redaction', () => {
    const secret = newSecret();
    const apiKey = 'api-key-0123456789';
    const forbidden = [
      's3cr3t-pass',
      'alice-token',
      'query-token-42',
      secret,
      secret.slice(6),
      apiKey,
      Buffer.from('alice-token:s3cr3t-pass').toString('base64'),
    ];
    const expectClean = (text: string) => {
      for (const value of forbidden) expect(text).not.toContain(value);
    };

    test('URL credentials become Basic authorization; nothing secret appears in errors even when the receiver echoes it', async () => {
      receiver.reply = (hit, res) =>
        void res
          .writeHead(401)
          .end(`echo ${hit.headers.authorization} ${hit.headers['x-api-key']} ${secret} ${hit.path}`);
      const url = receiver
        .url('/hook?token=query-token-42')
        .replace('http://', 'http://alice-token:s3cr3t-pass@');
      const error = errorOf(
        (await deliver(webhookRelay({ url, secret, headers: { 'x-api-key': apiKey } }), [envelope()]))[0],
      );
      expect(receiver.hits[0]!.headers.authorization).toBe(
        `Basic ${Buffer.from('alice-token:s3cr3t-pass').toString('base64')}`,
      );
      expect(error.message).toContain(`HTTP 401 Unauthorized`);
      expect(error.message).toContain(`${receiver.url('/hook')}?…`);
      expectClean(error.message);
    });

    test('network errors and url-function URLs are redacted too', async () => {
      const url = `http://alice-token:s3cr3t-pass@127.0.0.1:${await closedPort()}/hook?token=query-token-42`;
      for (const relay of [webhookRelay({ url, secret }), webhookRelay({ url: () => url, secret })]) {
        const error = errorOf((await deliver(relay, [envelope()]))[0]);
        expect(error.message).toMatch(/ECONNREFUSED/);
        expectClean(error.message);
      }
    });
  });
});
