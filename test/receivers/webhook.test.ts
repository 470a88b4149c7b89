/**
 * The webhook receiver against real servers: our webhook relay sends to it mounted in node:http,
 * Express 5, Fastify 5 and Hono, with Postgres behind both sides. Each message has exactly one
 * effect although every first answer is lost (the relay sends each message twice); a transaction
 * that fails at commit is answered 500, so the relay keeps the message, and the inbox holds
 * nothing of it; a wrong, missing, replayed or expired signature is refused with its status and
 * nothing is written.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Database from 'better-sqlite3';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { MissingMessageIdError, Outboxer, isOutboxerError, type PublishInput } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { nodePostgres } from 'outboxer/pg';
import {
  expressWebhookReceiver,
  fastifyWebhookReceiver,
  nodeWebhookReceiver,
  signWebhook,
  webhookReceiver,
  webhookRelay,
  type WebhookFetch,
  type WebhookReceiver,
} from 'outboxer/webhook';
import { postgresFixture } from '../support/databases.js';
import {
  clear,
  consumerOf,
  effects,
  inboxRows,
  pgRunner,
  recordEffect,
  type PostgresFixture,
} from './support.js';

const secret = `whsec_${randomBytes(32).toString('base64')}`;
const PATH = '/webhooks/orders';

interface Mounted {
  url: string;
  /** How the relay reaches it: the global fetch, or (Hono) the app's own `request`. */
  fetch: WebhookFetch;
  close(): Promise<void>;
}

const listening = async (server: ReturnType<typeof createServer>): Promise<string> => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}${PATH}`;
};
const closing = (server: ReturnType<typeof createServer>) => () =>
  new Promise<void>((resolve) => server.close(() => resolve()));
const globalFetch: WebhookFetch = (url, init) => fetch(url, init);

const frameworks: Array<{ name: string; mount: (receiver: WebhookReceiver) => Promise<Mounted> }> = [
  {
    name: 'node:http',
    mount: async (receiver) => {
      const server = createServer(nodeWebhookReceiver(receiver));
      return { url: await listening(server), fetch: globalFetch, close: closing(server) };
    },
  },
  {
    name: 'Express',
    mount: async (receiver) => {
      const app = express();
      // The receiver before the app's JSON parser: the signature covers the raw bytes.
      app.post(PATH, expressWebhookReceiver(receiver));
      app.use(express.json());
      app.post('/other', (req, res) => void res.json(req.body));
      const server = createServer(app);
      return { url: await listening(server), fetch: globalFetch, close: closing(server) };
    },
  },
  {
    name: 'Fastify',
    mount: async (receiver) => {
      const app = Fastify();
      await app.register(fastifyWebhookReceiver(receiver), { prefix: PATH });
      app.post('/other', async (request) => request.body); // still parsed as JSON: the plugin is encapsulated
      const base = await app.listen({ port: 0, host: '127.0.0.1' });
      return { url: `${base}${PATH}`, fetch: globalFetch, close: () => app.close() };
    },
  },
  {
    name: 'Hono',
    mount: async (receiver) => {
      const app = new Hono();
      app.post(PATH, (c) => receiver(c.req.raw));
      return {
        url: `http://hono.test${PATH}`,
        fetch: async (url, init) => app.request(url, init),
        close: async () => {},
      };
    },
  },
];

let fixture: PostgresFixture;
let consumer: Awaited<ReturnType<typeof consumerOf>>;
let runner: ReturnType<typeof pgRunner>;
let handled: string[];
let failHandlerFor: string | undefined;

function makeReceiver(options: { tolerance?: number } = {}): WebhookReceiver {
  return webhookReceiver({
    outboxer: consumer.outboxer,
    inbox: 'orders',
    secret,
    ...options,
    transaction: runner.transaction,
    handler: async (webhook, tx) => {
      handled.push(webhook.id);
      if (failHandlerFor === webhook.id) throw new Error('the handler failed');
      await recordEffect(tx, webhook.id, webhook.groupKey, webhook.body);
    },
  });
}

beforeAll(async () => {
  fixture = await postgresFixture();
  consumer = await consumerOf(fixture, 'orders');
});
afterAll(async () => {
  await consumer.outboxer.close();
  await fixture.close();
});
beforeEach(async () => {
  await clear(fixture);
  runner = pgRunner(fixture.pool);
  handled = [];
  failHandlerFor = undefined;
  consumer.logger.lines.length = 0;
});

/** A producer in manual testing mode whose relay sends to `mounted` through `fetch`. */
async function producerFor(table: string, mounted: Mounted, fetch: WebhookFetch) {
  const producer = new Outboxer({
    database: nodePostgres(fixture.pool),
    testing: 'manual',
    logger: false,
    outboxes: { orders: { table, relay: webhookRelay({ url: mounted.url, secret, fetch }) } },
  });
  await producer.migrate();
  return producer;
}

async function publish(producer: Outboxer<never>, inputs: PublishInput[]): Promise<string[]> {
  const ids = await fixture.transaction((tx) => producer.publishMany(tx as never, inputs));
  return ids.map(String);
}

const orders: PublishInput[] = [1, 2, 3, 4, 5, 6].map((n) => ({
  outbox: 'orders',
  payload: { n },
  type: 'order.step',
  groupKey: n % 2 === 0 ? 'order:even' : 'order:odd',
}));

describe.each(frameworks)('the webhook receiver in $name', ({ name, mount }) => {
  const table = `outbox_${name.replace(/\W/g, '').toLowerCase()}`;

  test('each message has one effect, in order per group, though each was delivered twice', async () => {
    const mounted = await mount(makeReceiver());
    const answers: Array<{ id: string; status: number }> = [];
    // The relay's network: every first answer is lost after the receiver committed, so the relay
    // sends that message again (with a new timestamp and signature).
    const lossy: WebhookFetch = async (url, init) => {
      const response = await mounted.fetch(url, init);
      const id = init.headers['webhook-id']!;
      const first = !answers.some((a) => a.id === id);
      answers.push({ id, status: response.status });
      if (first) throw new Error('the connection was reset before the answer arrived');
      return response;
    };
    const producer = await producerFor(table, mounted, lossy);
    try {
      const ids = await publish(producer, orders);
      const result = await producer.drain('orders');
      expect(result.pending).toBe(0);
      expect(result.delivered.map((m) => String(m.id)).sort()).toEqual([...ids].sort());

      const rows = await effects(fixture);
      expect(rows.map((r) => r.message_id).sort()).toEqual([...ids].sort());
      for (const group of ['order:odd', 'order:even']) {
        const published = ids.filter((_, i) => orders[i]!.groupKey === group);
        expect(rows.filter((r) => r.group_key === group).map((r) => r.message_id)).toEqual(published);
      }
      expect(rows[0]!.payload).toMatchObject({ type: 'order.step', data: { n: 1 } });
      // Each message: handled (204), then recognised (200 duplicate) and not handled again.
      for (const id of ids)
        expect(answers.filter((a) => a.id === id).map((a) => a.status)).toEqual([204, 200]);
      expect([...handled].sort()).toEqual([...ids].sort());
      expect(await inboxRows(fixture)).toBe(ids.length);
    } finally {
      await producer.close();
      await mounted.close();
    }
  });

  test('a failed commit or handler is answered 500: the relay keeps the message, the inbox holds nothing', async () => {
    const mounted = await mount(makeReceiver());
    const producer = await producerFor(`${table}_fail`, mounted, mounted.fetch);
    try {
      const [first, second, third] = await publish(producer, orders.slice(0, 3)); // odd, even, odd
      runner.failCommit = true; // the first message's commit fails
      failHandlerFor = second; // the second message's handler throws
      const round = await producer.drain('orders', { maxRounds: 1 });
      expect(round.delivered).toEqual([]);
      expect(round.retried.map((r) => String(r.envelope.id)).sort()).toEqual([first, second].sort());
      for (const { error } of round.retried) expect(error).toMatch(/500/);
      expect(handled.sort()).toEqual([first, second].sort()); // the third waits behind the first
      expect(await inboxRows(fixture)).toBe(0);
      expect(await effects(fixture)).toEqual([]);
      const logged = JSON.stringify(consumer.logger.lines.filter((line) => line.level === 'error'));
      expect(logged).toContain('the commit failed');
      expect(logged).toContain('the handler failed');

      failHandlerFor = undefined;
      const rest = await producer.drain('orders');
      expect(rest.pending).toBe(0);
      const rows = (await effects(fixture)).map((r) => r.message_id);
      expect([...rows].sort()).toEqual([first, second, third].sort());
      expect(rows.filter((id) => id !== second)).toEqual([first, third]);
    } finally {
      await producer.close();
      await mounted.close();
    }
  });
});

describe('signatures (node:http)', () => {
  let mounted: Mounted;
  beforeAll(async () => void (mounted = await frameworks[0]!.mount(makeReceiverLazy())));
  afterAll(() => mounted.close());
  // The receiver is built once, but its handler and runner read the per-test state.
  function makeReceiverLazy(): WebhookReceiver {
    return webhookReceiver({
      outboxer: consumer.outboxer,
      inbox: 'orders',
      secret,
      transaction: (work) => runner.transaction(work),
      handler: async (webhook, tx) => {
        handled.push(webhook.id);
        await recordEffect(tx, webhook.id, webhook.groupKey, webhook.body);
      },
    });
  }

  const now = () => Math.floor(Date.now() / 1000);
  const body = JSON.stringify({ type: 'order.paid', timestamp: new Date().toISOString(), data: { n: 1 } });

  interface Attempt {
    id?: string | undefined;
    timestamp?: number | string | undefined;
    signature?: string | undefined;
    body?: string;
    method?: string;
  }
  function signed(id: string, timestamp = now(), text = body, key: string = secret): Attempt {
    return { id, timestamp, body: text, signature: signWebhook(key, id, timestamp, text) };
  }
  async function send(attempt: Attempt): Promise<{ status: number; body: string }> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (attempt.id !== undefined) headers['webhook-id'] = attempt.id;
    if (attempt.timestamp !== undefined) headers['webhook-timestamp'] = String(attempt.timestamp);
    if (attempt.signature !== undefined) headers['webhook-signature'] = attempt.signature;
    const response = await fetch(mounted.url, {
      method: attempt.method ?? 'POST',
      headers,
      body: attempt.method === 'GET' ? undefined : (attempt.body ?? body),
    });
    return { status: response.status, body: await response.text() };
  }
  async function expectNothingWritten(): Promise<void> {
    expect(handled).toEqual([]);
    expect(await inboxRows(fixture)).toBe(0);
    expect(await effects(fixture)).toEqual([]);
  }

  test('a signed request is handled once; the same request again is a duplicate, not handled', async () => {
    const attempt = signed('m-1');
    expect(await send(attempt)).toEqual({ status: 204, body: '' });
    // Replayed as it was, within the tolerance: byte for byte a retry sent in the same second,
    // so it is answered as one, and the inbox keeps it from having a second effect.
    expect(await send(attempt)).toEqual({ status: 200, body: '{"duplicate":true}' });
    expect(handled).toEqual(['m-1']);
    expect((await effects(fixture)).map((r) => r.message_id)).toEqual(['m-1']);
  });

  test('a message that comes after a later one of its group is handled and reported to the handler', async () => {
    const orders: unknown[] = [];
    const receiver = webhookReceiver({
      outboxer: consumer.outboxer,
      inbox: 'orders',
      secret,
      transaction: (work) => runner.transaction(work),
      handler: async (webhook, tx, order) => {
        orders.push(order);
        await recordEffect(tx, webhook.id, webhook.groupKey, webhook.body);
      },
    });
    const request = (id: string) => {
      const timestamp = now();
      return new Request(mounted.url, {
        method: 'POST',
        headers: {
          'outboxer-group-key': 'order:7',
          'webhook-id': id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signWebhook(secret, id, timestamp, body),
        },
        body,
      });
    };
    expect((await receiver(request('20'))).status).toBe(204);
    expect((await receiver(request('10'))).status).toBe(204); // handled, although late
    expect(orders).toEqual([{ outOfOrder: false }, { outOfOrder: true, after: '20' }]);
    expect((await effects(fixture)).map((r) => r.message_id)).toEqual(['20', '10']);
  });

  test.each([
    [
      'a wrong secret',
      () => signed('m-2', now(), body, `whsec_${randomBytes(32).toString('base64')}`),
      401,
      'no-matching-signature',
    ],
    ['no signature', () => ({ ...signed('m-2'), signature: undefined }), 401, 'missing-signature'],
    ['an empty signature', () => ({ ...signed('m-2'), signature: '' }), 401, 'missing-signature'],
    [
      'a changed body',
      () => ({ ...signed('m-2'), body: body.replace('"n":1', '"n":2') }),
      401,
      'no-matching-signature',
    ],
    [
      'another message’s signature (replayed onto m-3)',
      () => ({ ...signed('m-2'), id: 'm-3' }),
      401,
      'no-matching-signature',
    ],
    [
      'a signature replayed with a fresh timestamp',
      () => ({ ...signed('m-2', now() - 400), timestamp: now() }),
      401,
      'no-matching-signature',
    ],
    [
      'an expired timestamp (a capture replayed later)',
      () => signed('m-2', now() - 301),
      401,
      'timestamp-too-old',
    ],
    ['a timestamp in the future', () => signed('m-2', now() + 301), 401, 'timestamp-too-new'],
    [
      'a timestamp that is not a number',
      () => ({ ...signed('m-2'), timestamp: 'yesterday' }),
      400,
      'invalid-timestamp',
    ],
    ['no webhook-id', () => ({ ...signed('m-2'), id: undefined }), 400, 'missing-header'],
  ] as const)(
    '%s is refused with its status and nothing is written',
    async (_what, attempt, status, reason) => {
      expect(await send(attempt())).toEqual({ status, body: JSON.stringify({ error: reason }) });
      await expectNothingWritten();
      expect(consumer.logger.lines).toContainEqual(
        expect.objectContaining({ level: 'warn', context: expect.objectContaining({ reason }) }),
      );
    },
  );

  test('not a POST: 405; a signed body that is not JSON: 400; too large: 413; nothing written', async () => {
    const get = await send({ method: 'GET' });
    expect(get.status).toBe(405);
    expect(await send(signed('m-4', now(), 'not json'))).toMatchObject({ status: 400 });
    const large = 'x'.repeat((1 << 20) + 1);
    expect(await send(signed('m-5', now(), JSON.stringify(large)))).toMatchObject({ status: 413 });
    await expectNothingWritten();
  });
});

describe('mounting mistakes and options', () => {
  test('Express with a JSON parser before the receiver: 500 naming the fix, nothing written', async () => {
    await clear(fixture);
    handled = [];
    const receiver = makeReceiver();
    const app = express();
    app.use(express.json());
    app.post(PATH, expressWebhookReceiver(receiver));
    const server = createServer(app);
    const url = await listening(server);
    try {
      const text = JSON.stringify({ a: 1 });
      const timestamp = Math.floor(Date.now() / 1000);
      const response = await fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'webhook-id': 'm-6',
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signWebhook(secret, 'm-6', timestamp, text),
        },
        body: text,
      });
      expect(response.status).toBe(500);
      expect(await response.text()).toMatch(/before any body parser/);
      expect(handled).toEqual([]);
      expect(await inboxRows(fixture)).toBe(0);
    } finally {
      await closing(server)();
    }
  });

  test('Express with express.raw() before the receiver verifies the raw bytes', async () => {
    await clear(fixture);
    const receiver = makeReceiver();
    const app = express();
    app.use(express.raw({ type: () => true }));
    app.post(PATH, expressWebhookReceiver(receiver));
    const server = createServer(app);
    const url = await listening(server);
    try {
      const text = '{ "spaced" : true }'; // parsed and serialised again, it would not match
      const timestamp = Math.floor(Date.now() / 1000);
      const response = await fetch(url, {
        method: 'POST',
        headers: {
          'webhook-id': 'm-7',
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signWebhook(secret, 'm-7', timestamp, text),
        },
        body: text,
      });
      expect(response.status).toBe(204);
      expect((await effects(fixture)).map((r) => r.payload)).toEqual([{ spaced: true }]);
    } finally {
      await closing(server)();
    }
  });

  test.each(frameworks.filter((f) => f.name === 'Express' || f.name === 'Fastify'))(
    '$name: the rest of the app still parses JSON',
    async ({ mount }) => {
      const mounted = await mount(makeReceiver());
      try {
        const other = new URL('/other', mounted.url);
        const response = await fetch(other, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{ "a" : 1 }',
        });
        expect(await response.json()).toEqual({ a: 1 });
      } finally {
        await mounted.close();
      }
    },
  );

  test('options are checked at construction, and secrets are not echoed', () => {
    const base = {
      outboxer: consumer.outboxer,
      inbox: 'orders',
      secret,
      transaction: runner.transaction,
      handler: () => undefined,
    };
    const refused = (options: object): string => {
      try {
        webhookReceiver(options as never);
      } catch (error) {
        expect(isOutboxerError(error)).toBe(true);
        return `${(error as { code: string }).code}: ${(error as Error).message}`;
      }
      throw new Error('accepted');
    };
    expect(refused({ ...base, inbox: 'nope' })).toMatch(/^UNKNOWN_INBOX: Unknown inbox "nope"/);
    expect(refused({ ...base, secret: 'whsec_not base64!' })).toMatch(
      /^INVALID_OPTIONS: Option "webhookReceiver.secret"/,
    );
    expect(refused({ ...base, secret: 'whsec_not base64!' })).not.toContain('not base64!');
    expect(refused({ ...base, secret: [] })).toMatch(/^INVALID_OPTIONS/);
    expect(refused({ ...base, handler: undefined })).toMatch(/"webhookReceiver.handler" must be a function/);
    expect(refused({ ...base, tolerance: -1 })).toMatch(/"webhookReceiver.tolerance" must be an integer/);
    expect(refused({ ...base, sorce: 'x' })).toMatch(/Unknown option "webhookReceiver.sorce"/);
    expect(new MissingMessageIdError('x', 'q').code).toBe('INVALID_MESSAGE');
  });

  test('on better-sqlite3 the runner and the handler are synchronous', async () => {
    const db = new Database(':memory:');
    const outboxer = new Outboxer({ database: betterSqlite3(db), logger: false, inboxes: { hooks: {} } });
    await outboxer.migrate();
    db.exec('CREATE TABLE charges (id text)');
    const receiver = webhookReceiver({
      outboxer,
      inbox: 'hooks',
      secret,
      transaction: (work) => db.transaction(() => work(db))(),
      handler: (webhook, tx) => void tx.prepare('INSERT INTO charges VALUES (?)').run(webhook.id),
    });
    const text = '{"data":1}';
    const timestamp = Math.floor(Date.now() / 1000);
    const request = () =>
      new Request('http://receiver.test/hooks', {
        method: 'POST',
        headers: {
          'webhook-id': '7',
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signWebhook(secret, '7', timestamp, text),
        },
        body: text,
      });
    expect((await receiver(request())).status).toBe(204);
    expect((await receiver(request())).status).toBe(200);
    expect(db.prepare('SELECT id FROM charges').all()).toEqual([{ id: '7' }]);
    await outboxer.close();
    db.close();
  });
});
