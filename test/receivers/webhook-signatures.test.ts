/**
 * The webhook receiver's signatures, mounted in node:http with Postgres behind it: a signed request
 * is handled once and the same request again is a duplicate; a late message of its group is still
 * handled and reported to the handler; a wrong, missing, replayed or expired signature is refused
 * with its status and nothing is written, as are a request that is not a POST, not JSON or too
 * large.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { signWebhook, webhookReceiver, type WebhookReceiver } from 'outboxer/webhook';
import { effects, inboxRows, recordEffect } from './support.js';
import {
  consumer,
  fixture,
  frameworks,
  handled,
  runner,
  secret,
  setUpWebhookConsumer,
  type Mounted,
} from './webhook-support.js';

setUpWebhookConsumer();

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
