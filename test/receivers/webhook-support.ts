/**
 * What the webhook receiver tests share (webhook-delivery, webhook-signatures and
 * webhook-mounting.test.ts): the signing secret, the receiver mounted in node:http, Express 5,
 * Fastify 5 and Hono, and the consumer side with Postgres behind it. setUpWebhookConsumer()
 * registers, in the calling test file, the hooks that create the fixture and the consumer once and
 * reset the runner, the handled ids and the logged lines before each test; the exported bindings
 * below are live, so a test reads each test's state through them.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import {
  expressWebhookReceiver,
  fastifyWebhookReceiver,
  nodeWebhookReceiver,
  webhookReceiver,
  type WebhookFetch,
  type WebhookReceiver,
} from 'outboxer/webhook';
import { postgresFixture } from '../support/databases.js';
import { clear, consumerOf, pgRunner, recordEffect, type PostgresFixture } from './support.js';

export const secret = `whsec_${randomBytes(32).toString('base64')}`;
export const PATH = '/webhooks/orders';

export interface Mounted {
  url: string;
  /** How the relay reaches it: the global fetch, or (Hono) the app's own `request`. */
  fetch: WebhookFetch;
  close(): Promise<void>;
}

export const listening = async (server: ReturnType<typeof createServer>): Promise<string> => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}${PATH}`;
};
export const closing = (server: ReturnType<typeof createServer>) => () =>
  new Promise<void>((resolve) => server.close(() => resolve()));
const globalFetch: WebhookFetch = (url, init) => fetch(url, init);

export const frameworks: Array<{ name: string; mount: (receiver: WebhookReceiver) => Promise<Mounted> }> = [
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

export let fixture: PostgresFixture;
export let consumer: Awaited<ReturnType<typeof consumerOf>>;
export let runner: ReturnType<typeof pgRunner>;
export let handled: string[];
let failHandlerFor: string | undefined;

/** Makes the handler of the receivers built by makeReceiver() throw for the message `id`. */
export function failHandlerOf(id: string | undefined): void {
  failHandlerFor = id;
}

/** Forgets the ids handled so far (beforeEach does it too). */
export function clearHandled(): void {
  handled = [];
}

export function makeReceiver(options: { tolerance?: number } = {}): WebhookReceiver {
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

/** The hooks of every webhook test file: one fixture and consumer per file, fresh state per test. */
export function setUpWebhookConsumer(): void {
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
}
