/**
 * The relay contract against the RabbitMQ server on 127.0.0.1:5672, plus the recovery tests.
 *
 * Outage: the relay's connection goes through a small TCP proxy in this process. Cutting it
 * (closing the listener and every piped socket) is what a broker restart or a network failure
 * looks like to amqplib; restoring it listens on the same port again. The shared server is never
 * stopped. The consumer reads over its own, direct connection.
 */
import amqp, { type ChannelModel, type ConsumeMessage } from 'amqplib';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { OutboxerError, SKIPPED } from 'outboxer';
import { rabbitmqRelay } from 'outboxer/rabbitmq';
import { makeContext, makeEnvelope } from '../support/envelopes.js';
import { tcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { relayContract, waitFor, type Destination, type Received } from './contract.js';

const URL = 'amqp://guest:guest@127.0.0.1:5672';
const random = () => Math.random().toString(36).slice(2, 10);
const throughProxy = (proxy: TcpProxy) => `amqp://guest:guest@127.0.0.1:${proxy.port}`;

/** A fresh topic exchange with one queue bound to `#`, and everything that arrived in it. */
async function exchangeWithQueue(consumer: ChannelModel) {
  const exchange = `outboxer-test-${random()}`;
  const channel = await consumer.createChannel();
  await channel.assertExchange(exchange, 'topic', { durable: false });
  const { queue } = await channel.assertQueue('', { exclusive: true });
  await channel.bindQueue(queue, exchange, '#');
  const messages: ConsumeMessage[] = [];
  await channel.consume(queue, (message) => message && messages.push(message), { noAck: true });
  return {
    exchange,
    messages,
    received: (): Received[] =>
      messages.map((m) => ({
        id: Number(m.properties.messageId),
        groupKey: (m.properties.headers?.['outboxer-group-key'] as string | undefined) ?? null,
        payload: JSON.parse(m.content.toString('utf8')),
        dedupeId: m.properties.messageId as string,
      })),
    async remove() {
      await channel.deleteExchange(exchange);
      await channel.close();
    },
  };
}

let consumer: ChannelModel;
beforeAll(async () => {
  consumer = await amqp.connect(URL);
});
afterAll(async () => {
  await consumer.close();
});

relayContract({
  name: 'rabbitmq',
  keepsOrder: true,
  dedupesById: true,
  // Two partitions: two batches in flight at once on the relay's one channel.
  outboxOptions: { partitions: 2 },
  async destination(): Promise<Destination> {
    const target = await exchangeWithQueue(consumer);
    const proxy = await tcpProxy(5672);
    // amqplib's recovering connection reconnects through the proxy once it is back.
    const connection = await amqp.connect(throughProxy(proxy), {
      recovery: { initialDelay: 50, maxDelay: 300 },
    });
    connection.on('error', () => undefined);
    return {
      relay: rabbitmqRelay({ connection, exchange: target.exchange, timeout: 2000 }),
      received: async () => target.received(),
      outage: { begin: proxy.cut, end: proxy.restore },
      async teardown() {
        await connection.close();
        await proxy.cut();
        await target.remove();
      },
    };
  },
  async misconfigured() {
    const connection = await amqp.connect(URL);
    return {
      relay: rabbitmqRelay({ connection, exchange: `outboxer-missing-${random()}` }),
      error:
        /^RELAY_MISCONFIGURED: RabbitMQ exchange "outboxer-missing-\w+" does not exist in this virtual host\. Declare it/,
      teardown: () => connection.close(),
    };
  },
  async refusal() {
    // The routing key (the group key by default) is an AMQP short string: at most 255 bytes.
    const target = await exchangeWithQueue(consumer);
    const connection = await amqp.connect(URL);
    return {
      relay: rabbitmqRelay({ connection, exchange: target.exchange }),
      message: { payload: { n: 1 }, groupKey: 'k'.repeat(300) },
      error: /^DELIVERY_FAILED: rabbitmqRelay\.routingKey returned a key of 300 bytes .*at most 255 bytes/,
      async teardown() {
        await connection.close();
        await target.remove();
      },
    };
  },
});

const envelope = (id: number, groupKey: string | null) => makeEnvelope({ id, groupKey, type: 'test.event' });

describe('rabbitmq relay recovery', () => {
  test('with connection: () => connect(), the relay reconnects on the next batch after an outage', async () => {
    const target = await exchangeWithQueue(consumer);
    const proxy = await tcpProxy(5672);
    let connects = 0;
    const relay = rabbitmqRelay({
      connection: () => {
        connects += 1;
        return amqp.connect(throughProxy(proxy));
      },
      exchange: target.exchange,
      timeout: 1000,
    });
    try {
      await relay.start!();
      expect(await relay.deliver([envelope(1, 'a')], makeContext())).toEqual([{ ok: true }]);
      await proxy.cut();
      const during = (await relay.deliver([envelope(2, 'a'), envelope(3, 'a')], makeContext())) as Array<{
        ok: boolean;
        error?: unknown;
      }>;
      expect(during[0]!.ok).toBe(false);
      expect(during[1]).toEqual({ ok: false, error: SKIPPED });
      await proxy.restore();
      expect(await relay.deliver([envelope(2, 'a'), envelope(3, 'a')], makeContext())).toEqual([
        { ok: true },
        { ok: true },
      ]);
      expect(connects).toBeGreaterThanOrEqual(2); // start(), maybe a refused attempt during the outage, the reconnect
      await waitFor(() => target.messages.length === 3, 5000, 'three messages');
      expect(target.received().map((m) => m.id)).toEqual([1, 2, 3]);
    } finally {
      await relay.stop!();
      await proxy.cut();
      await target.remove();
    }
  });

  test('with connection: () => connect(), an unreachable broker at start() is not an error; batches fail until it is back', async () => {
    const target = await exchangeWithQueue(consumer);
    const proxy = await tcpProxy(5672);
    await proxy.cut();
    const relay = rabbitmqRelay({
      connection: () => amqp.connect(throughProxy(proxy)),
      exchange: target.exchange,
      timeout: 1000,
    });
    try {
      await relay.start!();
      const [outcome] = (await relay.deliver([envelope(1, 'a')], makeContext())) as Array<{
        ok: boolean;
        error?: Error;
      }>;
      expect(outcome!.ok).toBe(false);
      expect(String(outcome!.error?.message)).toMatch(/ECONNREFUSED/);
      await proxy.restore();
      expect(await relay.deliver([envelope(1, 'a')], makeContext())).toEqual([{ ok: true }]);
    } finally {
      await relay.stop!();
      await proxy.cut();
      await target.remove();
    }
  });

  test('a recovering connection of the user is reused after it reconnected; stop() leaves it open', async () => {
    const target = await exchangeWithQueue(consumer);
    const proxy = await tcpProxy(5672);
    const connection = await amqp.connect(throughProxy(proxy), {
      recovery: { initialDelay: 50, maxDelay: 200 },
    });
    connection.on('error', () => undefined);
    const relay = rabbitmqRelay({ connection, exchange: target.exchange, timeout: 1000 });
    try {
      await relay.start!();
      await proxy.cut();
      const [outcome] = (await relay.deliver([envelope(1, 'a')], makeContext())) as Array<{
        ok: boolean;
        error?: Error;
      }>;
      expect(outcome!.ok).toBe(false);
      await proxy.restore();
      await waitFor(
        async () =>
          ((await relay.deliver([envelope(1, 'a')], makeContext())) as Array<{ ok: boolean }>)[0]!.ok,
        10_000,
        'delivery after the outage',
      );
      await relay.stop!();
      const channel = await connection.createChannel(); // still usable: the relay closed only its channel
      await channel.close();
    } finally {
      await connection.close();
      await proxy.cut();
      await target.remove();
    }
  });

  test('confirms that do not come within the timeout fail the wave; the channel is replaced', async () => {
    const target = await exchangeWithQueue(consumer);
    const proxy = await tcpProxy(5672);
    const relay = rabbitmqRelay({
      connection: () => amqp.connect(throughProxy(proxy)),
      exchange: target.exchange,
      timeout: 500,
    });
    try {
      await relay.start!();
      expect(await relay.deliver([envelope(1, 'a')], makeContext())).toEqual([{ ok: true }]);
      proxy.stall();
      // The proxy never passes the confirms on: the wave fails only by the relay's timeout.
      const during = (await relay.deliver([envelope(2, 'a'), envelope(3, 'b')], makeContext())) as Array<{
        ok: boolean;
        error?: Error;
      }>;
      expect(during.map((o) => o.ok)).toEqual([false, false]);
      expect(String(during[0]!.error?.message)).toMatch(/confirm 2 message\(s\) took longer than 500 ms/);
      proxy.resume();
      expect(await relay.deliver([envelope(2, 'a'), envelope(3, 'b')], makeContext())).toEqual([
        { ok: true },
        { ok: true },
      ]);
      // The stalled messages did reach the broker: the retry duplicates them, with the same message_id.
      await waitFor(() => target.messages.length === 5, 5000, 'the messages and their duplicates');
      expect(target.received().map((m) => m.id)).toEqual([1, 2, 3, 2, 3]);
    } finally {
      proxy.resume();
      await relay.stop!();
      await proxy.cut();
      await target.remove();
    }
  });

  test('bad credentials and an unknown virtual host are RELAY_MISCONFIGURED at start()', async () => {
    for (const url of [
      'amqp://guest:wrong@127.0.0.1:5672',
      `amqp://guest:guest@127.0.0.1:5672/missing-${random()}`,
    ]) {
      const relay = rabbitmqRelay({ connection: () => amqp.connect(url), exchange: 'amq.topic' });
      const error = await relay.start!().then(
        () => undefined,
        (e: unknown) => e,
      );
      await relay.stop!();
      expect(error).toBeInstanceOf(OutboxerError);
      expect((error as OutboxerError).code).toBe('RELAY_MISCONFIGURED');
      expect((error as OutboxerError).message).toMatch(/refused the login|virtual host/);
    }
  });
});
