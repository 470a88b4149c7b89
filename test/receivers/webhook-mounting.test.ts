/**
 * Mounting the webhook receiver, with Postgres behind it: Express with a JSON parser before the
 * receiver is answered 500 naming the fix, with express.raw() it verifies the raw bytes; in Express
 * and Fastify the rest of the app still parses JSON; options are checked at construction without
 * echoing secrets; on better-sqlite3 the runner and the handler are synchronous.
 */
import { createServer } from 'node:http';
import Database from 'better-sqlite3';
import express from 'express';
import { describe, expect, test } from 'vitest';
import { MissingMessageIdError, Outboxer, isOutboxerError } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { expressWebhookReceiver, signWebhook, webhookReceiver } from 'outboxer/webhook';
import { clear, effects, inboxRows } from './support.js';
import {
  PATH,
  clearHandled,
  closing,
  consumer,
  fixture,
  frameworks,
  handled,
  listening,
  makeReceiver,
  runner,
  secret,
  setUpWebhookConsumer,
} from './webhook-support.js';

setUpWebhookConsumer();

describe('mounting mistakes and options', () => {
  test('Express with a JSON parser before the receiver: 500 naming the fix, nothing written', async () => {
    await clear(fixture);
    clearHandled();
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
