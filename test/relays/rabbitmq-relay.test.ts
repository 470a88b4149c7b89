/**
 * What the RabbitMQ relay sends and how it reads the broker's answers, against the server on
 * 127.0.0.1:5672: message properties, routing, confirms, nacks, returns, channel errors.
 */
import amqp, { type Channel, type ChannelModel, type ConsumeMessage } from 'amqplib';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  DeliveryError,
  OutboxerError,
  PermanentError,
  SKIPPED,
  type DeliveryOutcome,
  type Envelope,
} from 'outboxer';
import { rabbitmqRelay, type RabbitMqRelayOptions } from 'outboxer/rabbitmq';
import { makeContext, makeEnvelope } from '../support/envelopes.js';
import { invalidOptions, waitFor } from './contract.js';

const URL = 'amqp://guest:guest@127.0.0.1:5672';
const random = () => Math.random().toString(36).slice(2, 10);

let connection: ChannelModel;
let admin: Channel;
const exchanges: string[] = [];

beforeAll(async () => {
  connection = await amqp.connect(URL);
  admin = await connection.createChannel();
});
afterAll(async () => {
  for (const exchange of exchanges) await admin.deleteExchange(exchange);
  await connection.close();
});

const envelope = (id: number, groupKey: string | null, extra: Partial<Envelope> = {}) =>
  makeEnvelope({ id, groupKey, type: 'order.paid', insertedAt: new Date('2026-11-29T12:00:00Z'), ...extra });

/** A direct exchange and queues bound to it by routing key; returns what each queue received. */
async function directExchange(queues: Record<string, Record<string, unknown>>) {
  const exchange = `outboxer-test-${random()}`;
  exchanges.push(exchange);
  await admin.assertExchange(exchange, 'direct', { durable: false });
  const received: Record<string, ConsumeMessage[]> = {};
  for (const [key, args] of Object.entries(queues)) {
    const { queue } = await admin.assertQueue('', { exclusive: true, arguments: args });
    await admin.bindQueue(queue, exchange, key);
    received[key] = [];
    // Without a consumer a queue fills up: the 'full' queues are read with get() instead.
    if (args['x-max-length'] === undefined)
      await admin.consume(queue, (m) => m && received[key]!.push(m), { noAck: true });
  }
  return { exchange, received };
}

async function withRelay<T>(
  options: Partial<RabbitMqRelayOptions> & { exchange: string },
  fn: (deliver: (batch: Envelope[]) => Promise<DeliveryOutcome[]>) => Promise<T>,
): Promise<T> {
  const relay = rabbitmqRelay({ connection, timeout: 5000, ...options });
  await relay.start!();
  try {
    return await fn(async (batch) => (await relay.deliver(batch, makeContext())) as DeliveryOutcome[]);
  } finally {
    await relay.stop!();
  }
}

const errorOf = (outcome: DeliveryOutcome | undefined): Error => (outcome as { error: Error }).error;

describe('rabbitmq relay', () => {
  test('sends message_id = outbox id, a persistent JSON body, the type, the timestamp and the standard headers', async () => {
    const { exchange, received } = await directExchange({ 'order:1': {} });
    await withRelay({ exchange }, async (deliver) => {
      const outcomes = await deliver([
        envelope(7, 'order:1', {
          headers: { traceparent: '00-abc-01' },
          payload: { total: 12.5, text: 'héllo' },
        }),
      ]);
      expect(outcomes).toEqual([{ ok: true }]);
    });
    await waitFor(() => received['order:1']!.length === 1, 5000, 'the message');
    const message = received['order:1']![0]!;
    expect(message.fields.routingKey).toBe('order:1'); // default routing key: the group key
    expect(message.properties).toMatchObject({
      messageId: '7',
      deliveryMode: 2,
      contentType: 'application/json',
      type: 'order.paid',
      timestamp: Date.parse('2026-11-29T12:00:00Z') / 1000,
    });
    expect(message.properties.headers).toEqual({
      traceparent: '00-abc-01',
      'outboxer-id': '7',
      'outboxer-outbox': 'events',
      'outboxer-type': 'order.paid',
      'outboxer-group-key': 'order:1',
    });
    expect(JSON.parse(message.content.toString('utf8'))).toEqual({ total: 12.5, text: 'héllo' });
  });

  test('routes by a fixed key or a function of the envelope; a message without group key and type gets neither header nor type', async () => {
    const { exchange, received } = await directExchange({ fixed: {}, 'by-type.created': {} });
    await withRelay({ exchange, routingKey: 'fixed' }, async (deliver) => {
      expect(await deliver([envelope(1, null, { type: null })])).toEqual([{ ok: true }]);
    });
    await withRelay(
      { exchange, routingKey: (m) => `by-type.${String((m.payload as { kind: string }).kind)}` },
      async (deliver) => {
        expect(await deliver([envelope(2, 'g', { payload: { kind: 'created' } })])).toEqual([{ ok: true }]);
      },
    );
    await waitFor(
      () => received.fixed!.length === 1 && received['by-type.created']!.length === 1,
      5000,
      'both messages',
    );
    expect(received.fixed![0]!.properties.type).toBeUndefined();
    expect(received.fixed![0]!.properties.headers).toEqual({
      'outboxer-id': '1',
      'outboxer-outbox': 'events',
    });
  });

  test('messageId replaces the outbox id as message_id; one it cannot be fails the message permanently', async () => {
    const { exchange, received } = await directExchange({ k: {} });
    await withRelay(
      { exchange, routingKey: 'k', messageId: (m) => (m.id === 2 ? '' : `${m.outbox}-${m.id}`) },
      async (deliver) => {
        const outcomes = await deliver([envelope(1, 'a'), envelope(2, 'b')]);
        expect(outcomes[0]).toEqual({ ok: true });
        expect(errorOf(outcomes[1])).toBeInstanceOf(PermanentError);
        expect(errorOf(outcomes[1]).message).toMatch(/messageId returned "" for message 2/);
      },
    );
    await waitFor(() => received.k!.length === 1, 5000, 'the message');
    expect(received.k![0]!.properties.messageId).toBe('events-1');
    expect(received.k![0]!.properties.headers?.['outboxer-id']).toBe('1');
  });

  test('an unroutable message fails retryably with mandatory (the default), and is dropped by the broker without it', async () => {
    const { exchange } = await directExchange({ bound: {} });
    await withRelay(
      { exchange, routingKey: (m) => (m.groupKey === 'lost' ? 'nowhere' : 'bound') },
      async (deliver) => {
        const outcomes = await deliver([envelope(1, 'lost'), envelope(2, 'lost'), envelope(3, 'ok')]);
        expect(errorOf(outcomes[0])).toBeInstanceOf(DeliveryError);
        expect((errorOf(outcomes[0]) as DeliveryError).permanent).toBe(false);
        expect(errorOf(outcomes[0]).message).toMatch(/unroutable \(312 NO_ROUTE\).*routing key "nowhere"/);
        expect(outcomes.slice(1)).toEqual([{ ok: false, error: SKIPPED }, { ok: true }]);
      },
    );
    await withRelay({ exchange, routingKey: 'nowhere', mandatory: false }, async (deliver) => {
      expect(await deliver([envelope(4, 'lost')])).toEqual([{ ok: true }]);
    });
  });

  test('partial failure: a nacked message fails, the rest of its group is not sent, other groups go on', async () => {
    // 'full' refuses every message (x-max-length 0, reject-publish): RabbitMQ nacks them.
    const { exchange, received } = await directExchange({
      full: { 'x-max-length': 0, 'x-overflow': 'reject-publish' },
      open: {},
    });
    const to = (m: Envelope) => String((m.payload as { to: string }).to);
    await withRelay({ exchange, routingKey: to }, async (deliver) => {
      const outcomes = await deliver([
        envelope(1, 'a', { payload: { to: 'open' } }),
        envelope(2, 'b', { payload: { to: 'full' } }),
        envelope(3, 'a', { payload: { to: 'open' } }),
        envelope(4, 'b', { payload: { to: 'open' } }),
        envelope(5, null, { payload: { to: 'full' } }),
        envelope(6, null, { payload: { to: 'open' } }),
      ]);
      expect(outcomes[0]).toEqual({ ok: true });
      expect(errorOf(outcomes[1]).message).toMatch(/nacked/);
      expect((errorOf(outcomes[1]) as DeliveryError).permanent).toBe(false);
      expect(outcomes[2]).toEqual({ ok: true });
      expect(outcomes[3]).toEqual({ ok: false, error: SKIPPED });
      expect(errorOf(outcomes[4]).message).toMatch(/nacked/);
      expect(outcomes[5]).toEqual({ ok: true });
    });
    await waitFor(() => received.open!.length === 3, 5000, 'the accepted messages');
    // With strictOrder, message 4 (group b, behind the nacked 2) never reached the broker.
    expect(received.open!.map((m) => m.properties.messageId).sort()).toEqual(['1', '3', '6']);
  });

  test('strictOrder: false sends the whole batch at once: after a nack, a later message of the group may already be in a queue', async () => {
    const { exchange, received } = await directExchange({
      full: { 'x-max-length': 0, 'x-overflow': 'reject-publish' },
      open: {},
    });
    const to = (m: Envelope) => String((m.payload as { to: string }).to);
    await withRelay({ exchange, routingKey: to, strictOrder: false }, async (deliver) => {
      const outcomes = await deliver([
        envelope(1, 'a', { payload: { to: 'full' } }),
        envelope(2, 'a', { payload: { to: 'open' } }),
      ]);
      expect(errorOf(outcomes[0]).message).toMatch(/nacked/);
      // Not counted as delivered (outboxer sends it again after 1), though the broker took it.
      expect(outcomes[1]).toEqual({ ok: false, error: SKIPPED });
    });
    await waitFor(() => received.open!.length === 1, 5000, 'the early message');
    expect(received.open![0]!.properties.messageId).toBe('2');
  });

  test('a message amqplib cannot encode, or whose routing key cannot be made, fails permanently; the others go', async () => {
    const { exchange } = await directExchange({ fine: {} });
    await withRelay(
      {
        exchange,
        routingKey: (m) =>
          m.groupKey === 'boom'
            ? (() => {
                throw new Error('no key');
              })()
            : m.groupKey === 'long'
              ? 'x'.repeat(300)
              : 'fine',
      },
      async (deliver) => {
        const outcomes = await deliver([
          envelope(1, 'long'),
          envelope(2, 'boom'),
          envelope(3, 'g'),
          envelope(4, 'g', { type: 'é'.repeat(200) }),
        ]);
        expect(errorOf(outcomes[0])).toBeInstanceOf(PermanentError);
        expect(errorOf(outcomes[0]).message).toMatch(/300 bytes.*at most 255/);
        expect(errorOf(outcomes[1])).toBeInstanceOf(PermanentError);
        expect(errorOf(outcomes[1]).message).toMatch(/routingKey threw.*no key/);
        expect(outcomes[2]).toEqual({ ok: true });
        // A type of 400 UTF-8 bytes does not fit an AMQP short string: amqplib refuses to encode it.
        expect(errorOf(outcomes[3])).toBeInstanceOf(PermanentError);
      },
    );
  });

  test('a missing exchange is RELAY_MISCONFIGURED at start(); deleted later, messages fail with the reason and the relay recovers once it is back', async () => {
    const missing = rabbitmqRelay({ connection, exchange: `outboxer-missing-${random()}` });
    const error = await missing.start!().catch((e: unknown) => e);
    await missing.stop!();
    expect((error as OutboxerError).code).toBe('RELAY_MISCONFIGURED');
    expect((error as OutboxerError).message).toMatch(/does not exist.*assertExchange/);

    // A failed start() closes what it opened (outboxer does not call stop() after it).
    let opened: ChannelModel | undefined;
    let closed = false;
    const owning = rabbitmqRelay({
      connection: async () => {
        opened = await amqp.connect(URL);
        opened.on('close', () => void (closed = true));
        return opened;
      },
      exchange: `outboxer-missing-${random()}`,
    });
    expect(((await owning.start!().catch((e: unknown) => e)) as OutboxerError).code).toBe(
      'RELAY_MISCONFIGURED',
    );
    expect(opened).toBeDefined();
    expect(closed).toBe(true);

    const { exchange, received } = await directExchange({ k: {} });
    await withRelay({ exchange, routingKey: 'k' }, async (deliver) => {
      expect(await deliver([envelope(1, 'a')])).toEqual([{ ok: true }]);
      await admin.deleteExchange(exchange);
      const outcomes = await deliver([envelope(2, 'a'), envelope(3, 'b')]);
      expect(errorOf(outcomes[0]).message).toMatch(/NOT_FOUND - no exchange.*Declare the exchange/);
      expect(errorOf(outcomes[1]).message).toMatch(/NOT_FOUND - no exchange/);
      await admin.assertExchange(exchange, 'direct', { durable: false });
      const { queue } = await admin.assertQueue('', { exclusive: true });
      await admin.bindQueue(queue, exchange, 'k');
      expect(await deliver([envelope(2, 'a'), envelope(3, 'b')])).toEqual([{ ok: true }, { ok: true }]);
      expect(await admin.checkQueue(queue)).toMatchObject({ messageCount: 2 });
    });
    expect(received.k).toHaveLength(1);
  });

  test('a plain connection of the user that closed is reported with what to do about it', async () => {
    const own = await amqp.connect(URL);
    const relay = rabbitmqRelay({ connection: own, exchange: 'amq.topic' });
    await relay.start!();
    await own.close();
    const outcomes = (await relay.deliver([envelope(1, 'a')], makeContext())) as DeliveryOutcome[];
    expect(errorOf(outcomes[0]).message).toMatch(
      /connection passed to rabbitmqRelay is closed.*recovery: true/,
    );
    await relay.stop!();
  });

  test('sends nothing once the signal fired', async () => {
    const { exchange, received } = await directExchange({ a: {} });
    const controller = new AbortController();
    controller.abort(new Error('shutting down'));
    const relay = rabbitmqRelay({ connection, exchange, routingKey: 'a' });
    await relay.start!();
    const outcomes = (await relay.deliver(
      [envelope(1, 'a'), envelope(2, null)],
      makeContext({ signal: controller.signal }),
    )) as DeliveryOutcome[];
    await relay.stop!();
    // Nothing was sent, so no attempt is counted: skipped, like deliverEach reports them.
    expect(outcomes).toEqual([
      { ok: false, error: SKIPPED },
      { ok: false, error: SKIPPED },
    ]);
    expect(received.a).toHaveLength(0);
  });

  test('options are validated in the factory', () => {
    const invalid = (options: unknown) =>
      invalidOptions(() => rabbitmqRelay(options as RabbitMqRelayOptions));
    expect(invalid(undefined)).toMatch(/rabbitmqRelay\(options\)/);
    expect(invalid({ exchange: 'x' })).toMatch(/"rabbitmqRelay.connection" must be an amqplib connection/);
    expect(invalid({ connection, exchange: 42 })).toMatch(/"rabbitmqRelay.exchange" must be a string/);
    expect(invalid({ connection, exchange: 'x'.repeat(256) })).toMatch(/at most 255 bytes/);
    expect(invalid({ connection, exchange: 'x', routingKey: 3 })).toMatch(/"rabbitmqRelay.routingKey"/);
    expect(invalid({ connection, exchange: 'x', mandatory: 'yes' })).toMatch(
      /"rabbitmqRelay.mandatory" must be true or false/,
    );
    expect(invalid({ connection, exchange: 'x', strictOrder: 1 })).toMatch(/"rabbitmqRelay.strictOrder"/);
    expect(invalid({ connection, exchange: 'x', timeout: 0 })).toMatch(
      /"rabbitmqRelay.timeout" must be an integer/,
    );
    expect(invalid({ connection, exchange: 'x', exchnage: 'y' })).toMatch(
      /Unknown option "rabbitmqRelay.exchnage"/,
    );
    expect(rabbitmqRelay({ connection, exchange: '' }).name).toBe('rabbitmq');
  });
});
