/**
 * The relay contract against NATS JetStream on 127.0.0.1:4222, plus the recovery tests. Every
 * destination is a stream with a random name and subject, deleted afterwards.
 *
 * Outage: the relay's connection goes through a small TCP proxy in this process. Cutting it
 * (closing the listener and every piped socket) is what a server restart or a network failure
 * looks like to the client, which keeps reconnecting (maxReconnectAttempts: -1); restoring it
 * listens on the same port again. The shared server is never stopped. The consumer reads over its
 * own, direct connection.
 */
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { SKIPPED, type DeliveryOutcome } from 'outboxer';
import { natsRelay } from 'outboxer/nats';
import { makeContext, makeEnvelope } from '../support/envelopes.js';
import { tcpProxy } from '../support/tcp-proxy.js';
import { relayContract, type Destination, type Received } from './contract.js';

const random = () => Math.random().toString(36).slice(2, 10);

/** A connection that reconnects quickly and forever, as the docs recommend (quicker for tests). */
const reconnecting = (servers: string) =>
  connect({ servers, maxReconnectAttempts: -1, reconnectTimeWait: 100, ignoreClusterUpdates: true });

let direct: NatsConnection;
let jsm: JetStreamManager;
beforeAll(async () => {
  direct = await connect({ servers: '127.0.0.1:4222' });
  jsm = await jetstreamManager(direct);
});
afterAll(async () => {
  await direct.close();
});

/**
 * A fresh stream on `outboxer.<random>.>` (with `config` added to its settings), and everything
 * stored in it, read by an ordered consumer.
 */
async function stream(config: { max_msg_size?: number } = {}) {
  const name = `OUTBOXER_${random().toUpperCase()}`;
  const subject = `outboxer.${random()}`;
  await jsm.streams.add({ name, subjects: [`${subject}.>`], ...config });
  const messages: JsMsg[] = [];
  const iterator = await (await jetstream(direct).consumers.get(name)).consume();
  const reading = (async () => {
    for await (const message of iterator) messages.push(message);
  })();
  return {
    name,
    subject,
    messages,
    received: (): Received[] =>
      messages.map((m) => ({
        id: Number(m.headers?.get('outboxer-id')),
        groupKey: m.headers?.has('outboxer-group-key') ? m.headers.get('outboxer-group-key') : null,
        payload: m.json(),
        dedupeId: m.headers?.get('Nats-Msg-Id'),
      })),
    async remove() {
      await iterator.close();
      await reading;
      await jsm.streams.delete(name);
    },
  };
}

relayContract({
  name: 'nats',
  keepsOrder: true,
  dedupesById: true,
  outboxOptions: { partitions: 2 },
  async destination(): Promise<Destination> {
    const target = await stream();
    const proxy = await tcpProxy(4222);
    const nc = await reconnecting(`127.0.0.1:${proxy.port}`);
    return {
      relay: natsRelay({
        jetstream: jetstream(nc),
        createHeaders: headers,
        subject: `${target.subject}.events`,
        timeout: 1000,
      }),
      received: async () => target.received(),
      outage: { begin: proxy.cut, end: proxy.restore },
      async teardown() {
        await nc.close();
        await proxy.cut();
        await target.remove();
      },
    };
  },
  async misconfigured() {
    const nc = await connect({ servers: '127.0.0.1:4222' });
    return {
      relay: natsRelay({
        jetstream: jetstream(nc),
        createHeaders: headers,
        subject: `outboxer.nowhere.${random()}`,
      }),
      error:
        /^RELAY_MISCONFIGURED: No JetStream stream captures subject "outboxer\.nowhere\.\w+"\. Create one/,
      teardown: () => nc.close(),
    };
  },
  async refusal() {
    // The stream's max_msg_size: the server refuses a larger message, however often it is sent.
    const target = await stream({ max_msg_size: 200 });
    const nc = await connect({ servers: '127.0.0.1:4222' });
    return {
      relay: natsRelay({
        jetstream: jetstream(nc),
        createHeaders: headers,
        subject: `${target.subject}.events`,
      }),
      message: { payload: { text: 'x'.repeat(500) } },
      error: /^DELIVERY_FAILED: NATS refused the message as too large: .*message size exceeds maximum/,
      async teardown() {
        await nc.close();
        await target.remove();
      },
    };
  },
});

const envelope = (id: number, groupKey: string | null) => makeEnvelope({ id, groupKey });

describe('nats relay recovery', () => {
  test('fails while the server is unreachable and delivers once the client reconnected; repeats are dropped by Nats-Msg-Id', async () => {
    const target = await stream();
    const proxy = await tcpProxy(4222);
    const nc = await reconnecting(`127.0.0.1:${proxy.port}`);
    const relay = natsRelay({
      jetstream: jetstream(nc),
      createHeaders: headers,
      subject: `${target.subject}.events`,
      timeout: 500,
    });
    try {
      await relay.start!();
      expect(await relay.deliver([envelope(1, 'a')], makeContext())).toEqual([{ ok: true }]);
      await proxy.cut();
      const during = (await relay.deliver(
        [envelope(2, 'a'), envelope(3, 'a'), envelope(4, 'b')],
        makeContext(),
      )) as Array<DeliveryOutcome & { error?: Error }>;
      expect(during[0]!.ok).toBe(false);
      expect(String(during[0]!.error?.message)).toMatch(/No PubAck from JetStream within 500 ms/);
      expect(during[1]).toEqual({ ok: false, error: SKIPPED });
      expect(during[2]!.ok).toBe(false);
      await proxy.restore();
      let outcomes: DeliveryOutcome[];
      let attempts = 0;
      do {
        outcomes = (await relay.deliver(
          [envelope(2, 'a'), envelope(3, 'a'), envelope(4, 'b')],
          makeContext(),
        )) as DeliveryOutcome[];
        attempts += 1;
      } while (!outcomes.every((o) => o.ok) && attempts < 50);
      expect(outcomes).toEqual([{ ok: true }, { ok: true }, { ok: true }]);
      const info = await jsm.streams.info(target.name);
      // Whatever the client flushed after reconnecting was stored once: the stream holds 1, 2, 3, 4.
      expect(info.state.messages).toBe(4);
    } finally {
      await nc.close();
      await proxy.cut();
      await target.remove();
    }
  });
});
