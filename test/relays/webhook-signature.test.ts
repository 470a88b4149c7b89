import { randomBytes } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { isOutboxerError } from 'outboxer';
import {
  signWebhook,
  verifyWebhook,
  WebhookVerificationError,
  type WebhookVerificationFailure,
} from 'outboxer/webhook';

// The vector of the Standard Webhooks reference libraries (the "sign function works" test of
// libraries/javascript/src/webhook.test.ts, and TestWebhookSign in libraries/go/webhook_test.go).
const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;
const now = () => Math.floor(Date.now() / 1000);

function signed(secret: string | string[], body: string, timestamp = now(), id = 'msg_1') {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signWebhook(secret, id, timestamp, body),
  };
}

function failure(fn: () => unknown): WebhookVerificationFailure | undefined {
  try {
    fn();
  } catch (error) {
    if (error instanceof WebhookVerificationError) return error.reason;
    throw error;
  }
  return undefined;
}

describe('Standard Webhooks test vector', () => {
  test('signWebhook produces the reference signature', () => {
    expect(signWebhook(VECTOR.secret, VECTOR.id, VECTOR.timestamp, VECTOR.body)).toBe(VECTOR.signature);
    expect(
      signWebhook(VECTOR.secret, VECTOR.id, new Date(VECTOR.timestamp * 1000), Buffer.from(VECTOR.body)),
    ).toBe(VECTOR.signature);
  });

  test('verifyWebhook accepts the reference signature, with or without the whsec_ prefix', () => {
    const headers = {
      'webhook-id': VECTOR.id,
      'webhook-timestamp': String(VECTOR.timestamp),
      'webhook-signature': VECTOR.signature,
    };
    for (const secret of [VECTOR.secret, VECTOR.secret.slice('whsec_'.length)]) {
      const verified = verifyWebhook(secret, headers, VECTOR.body, { tolerance: Infinity });
      expect(verified).toEqual({ id: VECTOR.id, timestamp: new Date(VECTOR.timestamp * 1000) });
    }
    // Without the tolerance override it is years old: refused.
    expect(failure(() => verifyWebhook(VECTOR.secret, headers, VECTOR.body))).toBe('timestamp-too-old');
  });
});

describe('verifyWebhook', () => {
  const secret = newSecret();
  const body = JSON.stringify({
    type: 'order.paid',
    timestamp: new Date().toISOString(),
    data: { orderId: 42 },
  });

  test('accepts a fresh, correctly signed request; headers in any case, as Headers or node arrays', () => {
    const headers = signed(secret, body);
    expect(verifyWebhook(secret, headers, body).id).toBe('msg_1');
    expect(verifyWebhook(secret, new Headers(headers), Buffer.from(body)).id).toBe('msg_1');
    const upper = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toUpperCase(), [v]]));
    expect(verifyWebhook(secret, upper, body).id).toBe('msg_1');
  });

  test('rejects a tampered body, id or timestamp', () => {
    const headers = signed(secret, body);
    expect(failure(() => verifyWebhook(secret, headers, `${body} `))).toBe('no-matching-signature');
    expect(failure(() => verifyWebhook(secret, headers, body.replace('42', '43')))).toBe(
      'no-matching-signature',
    );
    expect(failure(() => verifyWebhook(secret, { ...headers, 'webhook-id': 'msg_2' }, body))).toBe(
      'no-matching-signature',
    );
    expect(
      failure(() => verifyWebhook(secret, { ...headers, 'webhook-timestamp': String(now() - 1) }, body)),
    ).toBe('no-matching-signature');
  });

  test('rejects a wrong secret', () => {
    expect(failure(() => verifyWebhook(newSecret(), signed(secret, body), body))).toBe(
      'no-matching-signature',
    );
  });

  test('rejects timestamps outside the tolerance, both ways', () => {
    expect(failure(() => verifyWebhook(secret, signed(secret, body, now() - 301), body))).toBe(
      'timestamp-too-old',
    );
    expect(failure(() => verifyWebhook(secret, signed(secret, body, now() + 301), body))).toBe(
      'timestamp-too-new',
    );
    expect(failure(() => verifyWebhook(secret, signed(secret, body, now() - 290), body))).toBeUndefined();
    expect(
      failure(() => verifyWebhook(secret, signed(secret, body, now() - 290), body, { tolerance: 60 })),
    ).toBe('timestamp-too-old');
    expect(
      failure(() => verifyWebhook(secret, signed(secret, body, now() - 3600), body, { tolerance: 7200 })),
    ).toBeUndefined();
  });

  test('rejects missing headers and malformed timestamps', () => {
    const headers = signed(secret, body);
    for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const) {
      const { [name]: _removed, ...rest } = headers;
      expect(failure(() => verifyWebhook(secret, rest, body))).toBe('missing-header');
    }
    for (const timestamp of ['hello', '1.5', '-1', ' 1', '1e9']) {
      expect(failure(() => verifyWebhook(secret, { ...headers, 'webhook-timestamp': timestamp }, body))).toBe(
        'invalid-timestamp',
      );
    }
  });

  test('rejects partial, empty and foreign-scheme signatures', () => {
    const headers = signed(secret, body);
    const valid = headers['webhook-signature'];
    for (const signature of [
      valid.slice(0, 8),
      'v1,',
      'v1',
      `v1a,${valid.slice(3)}`,
      `v2,${valid.slice(3)}`,
      valid.slice(3),
    ]) {
      expect(failure(() => verifyWebhook(secret, { ...headers, 'webhook-signature': signature }, body))).toBe(
        'no-matching-signature',
      );
    }
  });

  test('accepts when any one of several signatures matches (sender rotating its key)', () => {
    const headers = signed(secret, body);
    const list = [
      'v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=',
      'v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=',
      headers['webhook-signature'],
    ];
    expect(verifyWebhook(secret, { ...headers, 'webhook-signature': list.join(' ') }, body).id).toBe('msg_1');
  });

  test('accepts several secrets (receiver rotating its key)', () => {
    const old = newSecret();
    expect(verifyWebhook([secret, old], signed(old, body), body).id).toBe('msg_1');
    expect(verifyWebhook([secret, old], signed(secret, body), body).id).toBe('msg_1');
  });

  test('signs with every secret, in the order given', () => {
    const other = newSecret();
    const both = signWebhook([secret, other], 'msg_1', 1_700_000_000, body).split(' ');
    expect(both).toEqual([
      signWebhook(secret, 'msg_1', 1_700_000_000, body),
      signWebhook(other, 'msg_1', 1_700_000_000, body),
    ]);
  });

  test('a verification failure is an OutboxerError with code INVALID_MESSAGE', () => {
    try {
      verifyWebhook(secret, {}, body);
      expect.unreachable();
    } catch (error) {
      expect(isOutboxerError(error)).toBe(true);
      expect((error as WebhookVerificationError).code).toBe('INVALID_MESSAGE');
    }
  });

  test('bad secrets and options are programming errors (INVALID_OPTIONS), and never echo the secret', () => {
    for (const bad of ['', 'whsec_', 'whsec_not base64!', 'whsec_abc', [] as string[]]) {
      expect(() => verifyWebhook(bad, signed(secret, body), body)).toThrow(
        expect.objectContaining({ code: 'INVALID_OPTIONS' }),
      );
    }
    let message = '';
    try {
      verifyWebhook('whsec_hunter2-is-my-password', {}, body);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/not base64/);
    expect(message).not.toContain('hunter2');
    expect(() => verifyWebhook(secret, signed(secret, body), body, { tolerance: -1 })).toThrow(/tolerance/);
  });
});
