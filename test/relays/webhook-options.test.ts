import { randomBytes } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { webhookRelay, type WebhookRelayOptions } from 'outboxer/webhook';
import { deliverBatch, makeEnvelope } from '../support/envelopes.js';

// Option checks and url-function misconfiguration: nothing here needs a server, as nothing is sent.

const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

async function deliverOne(options: WebhookRelayOptions): Promise<Error> {
  const message = makeEnvelope({ id: 1, type: 'order.paid', groupKey: 'g1', payload: { n: 1 } });
  const [outcome] = await deliverBatch(webhookRelay(options), [message]);
  expect(outcome?.ok).toBe(false);
  return (outcome as { error: Error }).error;
}

describe('webhook relay options', () => {
  describe('errors never echo a URL, a secret or a header value', () => {
    const secret = newSecret();
    const apiKey = 'api-key-0123456789';
    const forbidden = ['s3cr3t-pass', 'alice-token', secret, secret.slice(6), apiKey];
    const expectClean = (text: string) => {
      for (const value of forbidden) expect(text).not.toContain(value);
    };

    test('for invalid options', () => {
      const attempts: WebhookRelayOptions[] = [
        { url: 'ftp://alice-token:s3cr3t-pass@example.com/' },
        { url: 'alice-token:s3cr3t-pass' },
        { url: 'http://example.com/', secret: 's3cr3t-pass' },
        { url: 'http://example.com/', secret: [secret, 'whsec_s3cr3t-pass'] },
        { url: 'http://example.com/', headers: { 'x-api-key': `${apiKey}\nInjected: 1` } },
      ];
      for (const options of attempts) {
        expect(() => webhookRelay(options)).toThrow(expect.objectContaining({ code: 'INVALID_OPTIONS' }));
        try {
          webhookRelay(options);
        } catch (error) {
          expectClean((error as Error).message);
        }
      }
    });

    test('nor do errors of a url function returning a bad URL with credentials', async () => {
      const error = await deliverOne({ url: () => 'ftp://alice-token:s3cr3t-pass@example.com/', secret });
      expect(error.message).toMatch(/scheme is not http: or https:/);
      expectClean(error.message);
    });
  });

  describe('misconfiguration in a url function is retryable and says what is wrong', () => {
    test.each([
      [
        'throws',
        () => {
          throw new Error('no tenant');
        },
        /url function threw for message \d+: no tenant/,
      ],
      ['returns a non-URL', () => 'not a url', /returned something that is not an absolute URL/],
      [
        'returns another scheme',
        () => 'ftp://example.com/',
        /returned a URL whose scheme is not http: or https:/,
      ],
      ['returns undefined', () => undefined as unknown as string, /returned undefined/],
    ])('%s', async (_what, url, message) => {
      const error = await deliverOne({ url });
      expect(error).toMatchObject({ code: 'RELAY_MISCONFIGURED', retryable: true });
      expect(error.message).toMatch(message);
    });
  });

  describe('options validation', () => {
    const url = 'https://example.com/hooks';
    test.each<[string, unknown, RegExp]>([
      ['no options', undefined, /needs an options object/],
      ['no url', {}, /"url" must be an http\(s\) URL/],
      ['a relative url', { url: '/hooks' }, /"url" must be an absolute http: or https: URL/],
      [
        'a non-http url',
        { url: 'ws://example.com/' },
        /"url" must be .*got a URL whose scheme is not http: or https:/,
      ],
      [
        'credentials and an authorization header',
        { url: 'https://u:p@example.com/', headers: { authorization: 'Bearer x' } },
        /use one or the other/,
      ],
      ['an unknown option', { url, retries: 3 }, /Unknown webhookRelay option "retries"/],
      [
        'a secret without prefix',
        { url, secret: randomBytes(32).toString('base64') },
        /"secret" must be "whsec_" followed by the base64 of 24 to 64 random bytes; got a string without the "whsec_" prefix/,
      ],
      ['a short secret', { url, secret: `whsec_${randomBytes(16).toString('base64')}` }, /got 16 bytes/],
      ['a secret that is not base64', { url, secret: 'whsec_@@@@' }, /not base64/],
      [
        'an empty secret list',
        { url, secret: [] },
        /"secret" must be a "whsec_…" string or a non-empty array/,
      ],
      ['a bad secret in a list', { url, secret: [newSecret(), 'whsec_x'] }, /"secret\[1\]"/],
      [
        'a reserved header',
        { url, headers: { 'Webhook-Signature': 'v1,x' } },
        /"headers.Webhook-Signature" must be a header the relay does not set itself/,
      ],
      ['an outboxer header', { url, headers: { 'outboxer-id': '1' } }, /"headers.outboxer-id"/],
      ['a framing header', { url, headers: { 'Content-Length': '1' } }, /"headers.Content-Length"/],
      ['a non-string header', { url, headers: { 'x-n': 1 } }, /"headers.x-n" must be a string/],
      [
        'an invalid header name',
        { url, headers: { 'x n': 'v' } },
        /"headers.x n" must be a valid HTTP header/,
      ],
      ['a bad body', { url, body: 'envelope' }, /"body" must be 'standard', 'payload' or a function/],
      ['a zero timeout', { url, timeout: 0 }, /"timeout" must be an integer from 1 to 600000; got 0/],
      [
        'a fractional concurrency',
        { url, concurrency: 1.5 },
        /"concurrency" must be an integer from 1 to 256/,
      ],
      [
        '5xx in retryStatuses',
        { url, retryStatuses: [503] },
        /"retryStatuses" must be an array of 4xx status codes/,
      ],
      ['a negative maxRetryAfter', { url, maxRetryAfter: -1 }, /"maxRetryAfter" must be an integer from 0/],
      ['a fetch that is not a function', { url, fetch: 'undici' }, /"fetch" must be a fetch function/],
      ['an empty name', { url, name: '' }, /"name" must be a non-empty string/],
    ])('rejects %s', (_what, options, message) => {
      expect(() => webhookRelay(options as WebhookRelayOptions)).toThrow(message);
      expect(() => webhookRelay(options as WebhookRelayOptions)).toThrow(
        expect.objectContaining({ code: 'INVALID_OPTIONS' }),
      );
    });

    test('accepts the documented forms', () => {
      expect(webhookRelay({ url }).name).toBe('webhook');
      expect(
        webhookRelay({
          url: new URL(url),
          secret: [newSecret(), newSecret()],
          name: 'partner',
          concurrency: 256,
          timeout: 600_000,
          maxRetryAfter: 0,
          retryStatuses: [404],
        }).name,
      ).toBe('partner');
      expect(() => webhookRelay({ url: 'http://user:pass@example.com/' })).not.toThrow();
    });
  });
});
