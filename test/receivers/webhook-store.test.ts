/**
 * The webhook receiver with `store: true`, Postgres behind both sides: the webhook relay's
 * requests are answered as soon as the webhook is stored (nothing processed yet), a request sent
 * again is a duplicate, a bad signature stores nothing, and the inbox's process option then
 * processes every webhook once, in order per group. Only the webhook's own and outboxer's headers
 * are stored, never the signature or the caller's credentials.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { Outboxer, type StoredMessage } from 'outboxer';
import { nodePostgres } from 'outboxer/pg';
import { signWebhook, webhookReceiver, webhookRelay, type WebhookFetch } from 'outboxer/webhook';
import { postgresFixture } from '../support/databases.js';
import { waitUntil } from '../support/random.js';
import {
  effects,
  expectOncePerMessageInGroupOrder,
  orderSteps,
  pgRunner,
  recordEffect,
  type PostgresFixture,
} from './support.js';

const secret = `whsec_${randomBytes(32).toString('base64')}`;
const URL = 'http://receiver.test/hooks';
let fixture: PostgresFixture;

beforeAll(async () => {
  fixture = await postgresFixture();
  await fixture.pool.query(
    'CREATE TABLE effects (seq serial PRIMARY KEY, message_id text NOT NULL, group_key text, payload jsonb)',
  );
});
afterAll(() => fixture.close());

test('answers once stored, then processes each webhook once, in order per group', async () => {
  const runner = pgRunner(fixture.pool);
  const seen: StoredMessage[] = [];
  const consumer = new Outboxer({
    database: nodePostgres(fixture.pool),
    logger: false,
    inboxes: {
      hooks: {
        process: {
          transaction: runner.transaction,
          handler: async (message, tx) => {
            seen.push(message);
            const body = message.payload as { data: unknown };
            await recordEffect(tx, message.id, message.groupKey, body.data);
          },
          partitions: 2,
          pollInterval: 20,
        },
      },
    },
  });
  await consumer.migrate();
  const receiver = webhookReceiver({
    outboxer: consumer,
    inbox: 'hooks',
    secret,
    transaction: runner.transaction,
    store: true,
  });
  // The relay reaches the receiver's fetch handler directly; every answer is recorded.
  const statuses: number[] = [];
  const fetch: WebhookFetch = async (url, init) => {
    const response = await receiver(new Request(url, init as RequestInit));
    statuses.push(response.status);
    return response;
  };
  const producer = new Outboxer({
    database: nodePostgres(fixture.pool),
    testing: 'manual',
    logger: false,
    outboxes: { orders: { table: 'hook_outbox', relay: webhookRelay({ url: URL, secret, fetch }) } },
  });
  await producer.migrate();
  const published = orderSteps(6, 2);
  const ids = (await fixture.transaction((tx) => producer.publishMany(tx, published))).map(String);
  expect((await producer.drain('orders')).pending).toBe(0);
  await producer.close();
  expect(statuses).toEqual(ids.map(() => 204));
  expect(await effects(fixture)).toEqual([]); // answered before any processing
  expect((await consumer.counts('inbox:hooks')).pending).toBe(ids.length);

  // The first one sent again, with a fresh timestamp (a retry after a lost answer): a duplicate.
  const timestamp = Math.floor(Date.now() / 1000);
  const body = JSON.stringify({ type: 'order.step', timestamp: new Date().toISOString(), data: { n: 0 } });
  const again = (signature: string) =>
    receiver(
      new Request(URL, {
        method: 'POST',
        headers: {
          authorization: 'Bearer not-to-be-stored',
          'webhook-id': ids[0]!,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signature,
        },
        body,
      }),
    );
  expect((await again(signWebhook(secret, ids[0]!, timestamp, body))).status).toBe(200);
  // A wrong signature: refused, nothing stored.
  expect(
    (await again(signWebhook(`whsec_${randomBytes(32).toString('base64')}`, 'x', timestamp, body))).status,
  ).toBe(401);
  expect((await consumer.counts('inbox:hooks')).pending).toBe(ids.length);

  await consumer.start();
  try {
    await waitUntil(async () => (await consumer.counts('inbox:hooks')).pending === 0, 30_000, 'processed');
    expectOncePerMessageInGroupOrder(await effects(fixture), ids, published);
    const headers = Object.keys(seen[0]!.headers).sort();
    expect(headers).toEqual(
      expect.arrayContaining(['webhook-id', 'webhook-timestamp', 'outboxer-group-key']),
    );
    expect(headers).not.toContain('webhook-signature');
    expect(headers.filter((h) => !h.startsWith('webhook-') && !h.startsWith('outboxer-'))).toEqual([]);
  } finally {
    await consumer.stop();
  }
});

test('store: true needs an inbox with a process option, and no handler', () => {
  const consumer = new Outboxer({ database: nodePostgres(fixture.pool), inboxes: { plain: {} } });
  const options = {
    outboxer: consumer,
    inbox: 'plain',
    secret,
    transaction: pgRunner(fixture.pool).transaction,
  };
  expect(() => webhookReceiver({ ...options, store: true })).toThrow(
    /Option "webhookReceiver.store" must be false for inbox "plain", which has no process option/,
  );
  // Both a type error and, for callers without types, an error at construction.
  // @ts-expect-error: a handler with store: true
  expect(() => webhookReceiver({ ...options, store: true, handler: () => undefined })).toThrow(
    /Option "webhookReceiver.handler" must be left out with store: true/,
  );
  // @ts-expect-error: neither a handler nor store: true
  expect(() => webhookReceiver(options)).toThrow(/Option "webhookReceiver.handler" must be a function/);
});
