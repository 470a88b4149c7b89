/**
 * What the Redis Streams relay writes and how it reads Redis's replies, against the server on
 * 127.0.0.1:6379: entry layout, stream keys, trimming, per-command failures.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  DeliveryError,
  OutboxerError,
  PermanentError,
  SKIPPED,
  type DeliveryOutcome,
  type Envelope,
} from 'outboxer';
import { redisStreamsRelay, xaddCommand, type RedisStreamsRelayOptions } from 'outboxer/redis-streams';
import { makeContext, makeEnvelope } from '../support/envelopes.js';
import { invalidOptions } from './contract.js';

const random = () => Math.random().toString(36).slice(2, 10);
const prefix = `outboxer:test:${random()}`;

let redis: Redis;
beforeAll(() => {
  redis = new Redis({ host: '127.0.0.1', port: 6379 });
});
afterAll(async () => {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
});

const key = (name = random()) => `${prefix}:${name}`;

const envelope = (id: number, groupKey: string | null, extra: Partial<Envelope> = {}) =>
  makeEnvelope({ id, groupKey, type: 'order.paid', ...extra });

async function deliver(
  options: Partial<RedisStreamsRelayOptions> & Pick<RedisStreamsRelayOptions, 'stream'>,
  batch: Envelope[],
  signal?: AbortSignal,
): Promise<DeliveryOutcome[]> {
  const relay = redisStreamsRelay({ redis, ...options });
  await relay.start!();
  return (await relay.deliver(batch, makeContext({ signal }))) as DeliveryOutcome[];
}

/** The entries of a stream as [field, value] lists, in stream order. */
async function entries(stream: string): Promise<string[][]> {
  return (await redis.xrange(stream, '-', '+')).map(([, fields]) => fields);
}

const errorOf = (outcome: DeliveryOutcome | undefined): Error => (outcome as { error: Error }).error;

describe('redis-streams relay', () => {
  test('adds one entry per message: id, outbox, type, groupKey, payload (JSON) and headers (JSON), in that order', async () => {
    const stream = key();
    const outcomes = await deliver({ stream }, [
      envelope(7, 'order:1', {
        headers: { traceparent: '00-abc-01' },
        payload: { total: 12.5, text: 'héllo' },
      }),
      envelope(8, null, { type: null }),
    ]);
    expect(outcomes).toEqual([{ ok: true }, { ok: true }]);
    const [first, second] = await entries(stream);
    expect(first).toEqual([
      'id',
      '7',
      'outbox',
      'events',
      'type',
      'order.paid',
      'groupKey',
      'order:1',
      'payload',
      '{"total":12.5,"text":"héllo"}',
      'headers',
      JSON.stringify({
        traceparent: '00-abc-01',
        'outboxer-id': '7',
        'outboxer-outbox': 'events',
        'outboxer-type': 'order.paid',
        'outboxer-group-key': 'order:1',
      }),
    ]);
    // No type, no group key: the fields are left out rather than sent empty.
    expect(second).toEqual([
      'id',
      '8',
      'outbox',
      'events',
      'payload',
      '{"id":8}',
      'headers',
      '{"outboxer-id":"8","outboxer-outbox":"events"}',
    ]);
  });

  test('the stream key can be a function of the envelope, e.g. one stream per group', async () => {
    const base = key();
    const outcomes = await deliver({ stream: (m) => `${base}:${m.groupKey ?? 'none'}` }, [
      envelope(1, 'a'),
      envelope(2, 'b'),
      envelope(3, 'a'),
      envelope(4, null),
    ]);
    expect(outcomes.every((o) => o.ok)).toBe(true);
    expect((await entries(`${base}:a`)).map((f) => f[1])).toEqual(['1', '3']);
    expect((await entries(`${base}:b`)).map((f) => f[1])).toEqual(['2']);
    expect((await entries(`${base}:none`)).map((f) => f[1])).toEqual(['4']);
  });

  test('maxLength trims each stream to about that many entries (XADD … MAXLEN ~ n)', async () => {
    expect(xaddCommand('s', envelope(1, null), 100).slice(0, 6)).toEqual([
      'xadd',
      's',
      'MAXLEN',
      '~',
      '100',
      '*',
    ]);
    const stream = key();
    const batch = Array.from({ length: 1000 }, (_, i) => envelope(i + 1, null));
    expect((await deliver({ stream, maxLength: 100 }, batch)).every((o) => o.ok)).toBe(true);
    const length = await redis.xlen(stream);
    expect(length).toBeGreaterThanOrEqual(100);
    expect(length).toBeLessThan(1000);
  });

  test('a redelivered message is a second entry with the same id: Redis Streams do not deduplicate', async () => {
    const stream = key();
    await deliver({ stream }, [envelope(1, 'a')]);
    await deliver({ stream }, [envelope(1, 'a')]);
    expect((await entries(stream)).map((f) => f[1])).toEqual(['1', '1']);
  });

  test('partial failure: a failed XADD fails its message, the rest of its group is not sent, other groups go on', async () => {
    const base = key();
    await redis.set(`${base}:b`, 'not a stream');
    const outcomes = await deliver({ stream: (m) => `${base}:${m.groupKey ?? 'none'}` }, [
      envelope(1, 'a'),
      envelope(2, 'b'),
      envelope(3, 'a'),
      envelope(4, 'b'),
      envelope(5, null),
    ]);
    expect(outcomes[0]).toEqual({ ok: true });
    expect(errorOf(outcomes[1])).toBeInstanceOf(DeliveryError);
    expect((errorOf(outcomes[1]) as DeliveryError).permanent).toBe(false);
    expect(errorOf(outcomes[1]).message).toMatch(/WRONGTYPE.*holds another type than a stream/);
    expect(outcomes.slice(2)).toEqual([{ ok: true }, { ok: false, error: SKIPPED }, { ok: true }]);
  });

  test('strictOrder: false sends the whole batch in one pipeline: after a failure, a later message of the group may be added', async () => {
    const base = key();
    await redis.set(`${base}:broken`, 'not a stream');
    const to = (m: Envelope) => `${base}:${String((m.payload as { to: string }).to)}`;
    const batch = [
      envelope(1, 'a', { payload: { to: 'broken' } }),
      envelope(2, 'a', { payload: { to: 'fine' } }),
    ];
    const strict = await deliver({ stream: to }, batch);
    expect(strict[1]).toEqual({ ok: false, error: SKIPPED });
    expect(await redis.xlen(`${base}:fine`)).toBe(0); // never sent
    const loose = await deliver({ stream: to, strictOrder: false }, batch);
    expect(errorOf(loose[0]).message).toMatch(/WRONGTYPE/);
    expect(loose[1]).toEqual({ ok: false, error: SKIPPED }); // not counted as delivered…
    expect(await redis.xlen(`${base}:fine`)).toBe(1); // …though it was added, ahead of 1
  });

  test('a stream key function that throws or returns no key fails the message permanently', async () => {
    const stream = key();
    const outcomes = await deliver(
      {
        stream: (m) =>
          m.groupKey === 'throws'
            ? (() => {
                throw new Error('no key');
              })()
            : m.groupKey === 'empty'
              ? ''
              : stream,
      },
      [envelope(1, 'throws'), envelope(2, 'empty'), envelope(3, 'fine')],
    );
    expect(errorOf(outcomes[0])).toBeInstanceOf(PermanentError);
    expect(errorOf(outcomes[0]).message).toMatch(/stream threw.*no key/);
    expect(errorOf(outcomes[1])).toBeInstanceOf(PermanentError);
    expect(outcomes[2]).toEqual({ ok: true });
  });

  test('start() reports a key of another type and refused credentials as RELAY_MISCONFIGURED', async () => {
    const stream = key();
    await redis.set(stream, 'x');
    const wrongType = await redisStreamsRelay({ redis, stream }).start!().catch((e: unknown) => e);
    expect((wrongType as OutboxerError).code).toBe('RELAY_MISCONFIGURED');
    expect((wrongType as OutboxerError).message).toMatch(/holds a string, not a stream/);
    await redisStreamsRelay({ redis, stream, checkStream: false }).start!();
    await redisStreamsRelay({ redis, stream: () => stream }).start!(); // a function: only PING

    const stranger = new Redis({
      host: '127.0.0.1',
      port: 6379,
      username: `nobody-${random()}`,
      password: 'wrong',
    });
    stranger.on('error', () => undefined);
    try {
      const refused = await redisStreamsRelay({ redis: stranger, stream: key() }).start!().catch(
        (e: unknown) => e,
      );
      expect((refused as OutboxerError).code).toBe('RELAY_MISCONFIGURED');
      expect((refused as OutboxerError).message).toMatch(/WRONGPASS/);
    } finally {
      stranger.disconnect();
    }
  });

  test('a closed client is reported with what to do about it', async () => {
    const closed = new Redis({ host: '127.0.0.1', port: 6379 });
    await closed.quit();
    const relay = redisStreamsRelay({ redis: closed, stream: key() });
    const [outcome] = (await relay.deliver([envelope(1, 'a')], makeContext())) as DeliveryOutcome[];
    expect(errorOf(outcome).message).toMatch(/ioredis client is closed.*cannot reopen it/);
  });

  test('sends nothing once the signal fired', async () => {
    const stream = key();
    const controller = new AbortController();
    controller.abort(new Error('shutting down'));
    const outcomes = await deliver({ stream }, [envelope(1, 'a'), envelope(2, null)], controller.signal);
    // Nothing was sent, so no attempt is counted: skipped, like deliverEach reports them.
    expect(outcomes).toEqual([
      { ok: false, error: SKIPPED },
      { ok: false, error: SKIPPED },
    ]);
    expect(await redis.exists(stream)).toBe(0);
  });

  test('options are validated in the factory', () => {
    const invalid = (options: unknown) =>
      invalidOptions(() => redisStreamsRelay(options as RedisStreamsRelayOptions));
    expect(invalid('redis')).toMatch(/redisStreamsRelay\(options\)/);
    expect(invalid({ stream: 's' })).toMatch(/"redisStreamsRelay.redis" must be an ioredis client/);
    expect(invalid({ redis, stream: '' })).toMatch(/"redisStreamsRelay.stream" must be a stream key/);
    expect(invalid({ redis, stream: 's', maxLength: 0 })).toMatch(
      /"redisStreamsRelay.maxLength" must be an integer from 1/,
    );
    expect(invalid({ redis, stream: 's', maxLength: 1.5 })).toMatch(/maxLength/);
    expect(invalid({ redis, stream: 's', timeout: '1s' })).toMatch(/"redisStreamsRelay.timeout"/);
    expect(invalid({ redis, stream: 's', strictOrder: null })).toMatch(
      /"redisStreamsRelay.strictOrder" must be true or false/,
    );
    expect(invalid({ redis, stream: 's', maxlen: 5 })).toMatch(/Unknown option "redisStreamsRelay.maxlen"/);
    expect(redisStreamsRelay({ redis, stream: 's' }).name).toBe('redis-streams');
  });
});
