import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import {
  DeliveryError,
  Outboxer,
  PermanentError,
  SKIPPED,
  type DeliveryOutcome,
  type Envelope,
  type Ordering,
  type Relay,
} from 'outboxer';
import { verifyWebhook, webhookRelay, type WebhookRelayOptions } from 'outboxer/webhook';
import { sqliteFixture } from '../support/databases.js';
import { deliverBatch, makeContext, makeEnvelope } from '../support/envelopes.js';
import { closedPort } from '../support/tcp-proxy.js';
import { orderViolations, relayContract, waitFor, type Received } from './contract.js';

// ---------------------------------------------------------------------------------------------
// A real HTTP receiver on 127.0.0.1, random port: records every request and answers with `reply`.
// ---------------------------------------------------------------------------------------------

interface Hit {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

type Reply = (hit: Hit, res: ServerResponse) => void | Promise<void>;

const noContent: Reply = (_hit, res) => void res.writeHead(204).end();

class Receiver {
  readonly hits: Hit[] = [];
  reply: Reply = noContent;
  private server: Server;
  private readonly sockets = new Set<Socket>();
  port = 0;

  private constructor() {
    this.server = this.createServer();
  }

  static async start(): Promise<Receiver> {
    const receiver = new Receiver();
    await receiver.listen(0);
    return receiver;
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Headers of the requests, for the tests that look at one header. */
  header(name: string): string[] {
    return this.hits.map((hit) => String(hit.headers[name]));
  }

  private createServer(): Server {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const hit = {
          path: req.url ?? '',
          headers: req.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        };
        this.hits.push(hit);
        Promise.resolve(this.reply(hit, res)).catch(() => res.destroy());
      });
    });
    server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    return server;
  }

  private async listen(port: number): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.address() as AddressInfo).port;
  }

  /** Connections clients still hold open. */
  openConnections(): number {
    return this.sockets.size;
  }

  /** Stops answering: the port refuses connections until {@link restart}. */
  async stop(): Promise<void> {
    const closed = new Promise((resolve) => this.server.close(resolve));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  /** Listens again on the same port. */
  async restart(): Promise<void> {
    this.server = this.createServer();
    await this.listen(this.port);
  }
}

const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

const envelope = (overrides: Partial<Envelope> = {}) =>
  makeEnvelope({ type: 'order.paid', groupKey: 'g1', payload: { n: 1 }, ...overrides });

/** Delivers `batch` and checks that the relay reported one outcome per message. */
async function deliver(
  relay: Relay,
  batch: Envelope[],
  context: { ordering?: Ordering; signal?: AbortSignal } = {},
): Promise<DeliveryOutcome[]> {
  const outcomes = await deliverBatch(relay, batch, makeContext(context));
  expect(outcomes).toHaveLength(batch.length);
  return outcomes;
}

/** The error of a failed outcome. */
function errorOf(outcome: DeliveryOutcome | undefined): Error {
  expect(outcome?.ok).toBe(false);
  return (outcome as { error: Error }).error;
}

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
      const started = Date.now();
      const error = errorOf(
        (await deliver(webhookRelay({ url: receiver.url(), timeout: 300 }), [envelope()]))[0],
      );
      expect(Date.now() - started).toBeLessThan(3000);
      expect(error).toBeInstanceOf(DeliveryError);
      expect((error as DeliveryError).permanent).toBe(false);
      expect(error.message).toContain('timed out after 300 ms');
    });

    test('the timeout covers a response body that never ends', async () => {
      receiver.reply = (_hit, res) => {
        res.writeHead(500);
        res.write('partial');
      };
      const started = Date.now();
      const error = errorOf(
        (await deliver(webhookRelay({ url: receiver.url(), timeout: 300 }), [envelope()]))[0],
      );
      expect(Date.now() - started).toBeLessThan(3000);
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
          const started = Date.now();
          const error = errorOf(
            (await deliver(webhookRelay({ url: receiver.url(), timeout: 300 }), [envelope()]))[0],
          );
          expect(Date.now() - started).toBeLessThan(3000);
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
