/**
 * The relay contract against the real Kafka broker (127.0.0.1:9092), once per client library (each
 * installed major of @platformatic/kafka, and kafkajs), plus what a real network outage does to a
 * send in flight.
 *
 * Outages are per test, not global (the broker is shared with other test files): each producer
 * reaches Kafka through its own small TCP proxy on a random port, and the test cuts and restores that
 * proxy. The proxy forwards bytes untouched. Kafka clients connect to the address the broker
 * advertises (127.0.0.1:9092) once they have read the metadata, which would bypass a proxy given only
 * as the bootstrap address, so each client is told to open every connection through the proxy:
 * kafkajs with its public `socketFactory` option, @platformatic/kafka by mapping the broker address
 * in its connection pool (`producer.connections`).
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Kafka, logLevel } from 'kafkajs';
import { isOutboxerError, OutboxerError, PermanentError, SKIPPED, type Relay } from 'outboxer';
import {
  javaPartition,
  kafkajsProducer,
  kafkaRelay,
  platformaticProducer,
  type KafkaClientAdapter,
} from 'outboxer/kafka';
import { deliverBatch, makeContext, makeEnvelope } from '../support/envelopes.js';
import { tcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { relayContract, waitFor, type Received } from './contract.js';
import {
  BROKER,
  randomName,
  readTopics,
  runnableLines,
  skipUnsupportedLines,
  topicAdmin,
  type ReadRecord,
} from './kafka-support.js';

skipUnsupportedLines('the Kafka relay contract, outage and SASL tests');
const { admin, createTopic } = topicAdmin();

/** How many records the topic holds: the sum of its partitions' end offsets. */
async function recordCount(topic: string): Promise<number> {
  const partitions = [0, 1, 2].map((partitionIndex) => ({ partitionIndex, timestamp: -1n }));
  const offsets = await admin.listOffsets({ topics: [{ name: topic, partitions }] });
  return offsets.flatMap((t) => t.partitions).reduce((sum, p) => sum + Number(p.offset), 0);
}

/** What the contract's consumer sees of a record: the key is the group key. */
const received = (record: ReadRecord): Received => ({
  id: record.id,
  groupKey: record.key,
  payload: JSON.parse(record.value),
  dedupeId: record.headers['outboxer-id'],
});

/** A client under test, reaching Kafka through `proxy` when one is given. */
interface ClientUnderTest {
  readonly adapter: KafkaClientAdapter;
  close(): Promise<void>;
}

/** The idempotent kafkajs producer the relay wants, with the admin client it reads partitions with. */
function kafkajsClient(kafka: Kafka): ClientUnderTest {
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
  });
  const kafkaAdmin = kafka.admin();
  return {
    adapter: kafkajsProducer(producer, { admin: kafkaAdmin }),
    close: async () => {
      await producer.disconnect();
      await kafkaAdmin.disconnect();
    },
  };
}

const clients: Record<string, (proxy?: TcpProxy) => ClientUnderTest> = {
  ...Object.fromEntries(
    runnableLines.map(({ name, kafka }) => [
      name,
      (proxy?: TcpProxy) => {
        const port = proxy?.port ?? BROKER.port;
        const producer = new kafka.Producer({
          clientId: randomName('outboxer-test'),
          bootstrapBrokers: [`${BROKER.host}:${port}`],
          idempotent: true,
        });
        if (proxy !== undefined) routeThrough(producer, proxy.port);
        return { adapter: platformaticProducer(producer), close: () => producer.close() };
      },
    ]),
  ),
  kafkajs: (proxy) => {
    const kafka = new Kafka({
      clientId: randomName('outboxer-test'),
      brokers: [`${BROKER.host}:${BROKER.port}`],
      logLevel: logLevel.NOTHING,
      socketFactory:
        proxy === undefined
          ? undefined
          : ({ onConnect }) => net.connect({ host: BROKER.host, port: proxy.port }, onConnect),
    });
    return kafkajsClient(kafka);
  },
};

/** Makes a @platformatic/kafka client open every broker connection through the proxy. */
function routeThrough(producer: { connections: unknown }, port: number): void {
  type Broker = { host: string; port: number };
  const pool = producer.connections as {
    get(broker: Broker, callback?: unknown): unknown;
    getFirstAvailable(brokers: Broker[], callback?: unknown): unknown;
  };
  const viaProxy = (broker: Broker): Broker => ({ ...broker, host: BROKER.host, port });
  const get = pool.get.bind(pool);
  const getFirstAvailable = pool.getFirstAvailable.bind(pool);
  pool.get = (broker, callback) => get(viaProxy(broker), callback);
  pool.getFirstAvailable = (brokers, callback) => getFirstAvailable(brokers.map(viaProxy), callback);
}

/** How @platformatic/kafka behaves where the contract lets clients differ (both majors alike). */
const platformaticTraits = {
  // Keeps retrying a send while the broker is unreachable: the batch waits, nothing fails meanwhile.
  // An unknown topic is retried too, until the relay's metadataTimeout.
  holdsSends: true,
  missingTopic:
    /^RELAY_MISCONFIGURED: Kafka relay "kafka": Kafka did not return metadata for topic "outboxer-missing-\w+" within 3000 ms through @platformatic\/kafka: the topic probably does not exist/,
};

/** How each client behaves where the contract lets clients differ. */
const traits: Record<string, { holdsSends: boolean; missingTopic: RegExp }> = {
  ...Object.fromEntries(runnableLines.map(({ name }) => [name, platformaticTraits])),
  kafkajs: {
    holdsSends: false,
    missingTopic:
      /^RELAY_MISCONFIGURED: Kafka relay "kafka": topic "outboxer-missing-\w+" does not exist\. Create it/,
  },
};

for (const [client, make] of Object.entries(clients)) {
  relayContract({
    name: `kafka (${client})`,
    keepsOrder: true,
    dedupesById: true,
    async destination() {
      const topic = await createTopic(3);
      const proxy = await tcpProxy(BROKER);
      const producer = make(proxy);
      const reader = await readTopics([topic]);
      return {
        relay: kafkaRelay({ producer: producer.adapter, topic }),
        received: async () => reader.records.map(received),
        outage: { begin: proxy.cut, end: proxy.restore, holdsSends: traits[client]!.holdsSends },
        async teardown() {
          await reader.close();
          await producer.close();
          await proxy.cut();
        },
      };
    },
    async misconfigured() {
      const producer = make();
      return {
        relay: kafkaRelay({
          producer: producer.adapter,
          topic: randomName('outboxer-missing'),
          metadataTimeout: 3000,
        }),
        error: traits[client]!.missingTopic,
        teardown: () => producer.close(),
      };
    },
    async refusal() {
      // The broker refuses a record over the topic's max.message.bytes (under the relay's maxBytes).
      const topic = await createTopic(3, 2048);
      const producer = make();
      await warmUp(kafkaRelay({ producer: producer.adapter, topic }));
      return {
        relay: kafkaRelay({ producer: producer.adapter, topic }),
        message: { payload: { text: 'x'.repeat(4000) } },
        error:
          /^DELIVERY_FAILED: Kafka rejected the message for good on topic "outboxer-test-\w+" partition \d+: MESSAGE_TOO_LARGE/,
        teardown: () => producer.close(),
      };
    },
  });
}

const envelope = (groupKey: string | null) => makeEnvelope({ groupKey, type: 'test' });

/**
 * Sends small records to every partition of a new topic until each is accepted: for a moment after
 * the topic is created, a broker can answer NOT_LEADER_OR_FOLLOWER even once the metadata names a
 * leader, and a test of a first send's own outcome must not meet that.
 */
async function warmUp(relay: Relay): Promise<void> {
  await relay.start!();
  const warm = Array.from({ length: 12 }, (_, i) => envelope(`warm:${i}`));
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const outcomes = await deliverBatch(relay, warm, makeContext());
    if (outcomes.every((o) => o.ok)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the new topic never accepted a record');
}

describe.each(Object.keys(clients))('kafka relay (%s) during a network outage', (client) => {
  let topic: string;
  let proxy: TcpProxy;
  let producer: ClientUnderTest;
  let relay: Relay;
  beforeAll(async () => {
    topic = await createTopic(3);
    proxy = await tcpProxy(BROKER);
    producer = clients[client]!(proxy);
    relay = kafkaRelay({ producer: producer.adapter, topic });
    await relay.start!();
  });
  afterAll(async () => {
    await producer.close();
    await proxy.cut();
  });

  test('abandons a send stuck behind the outage when the signal fires; the next send waits for it', async () => {
    await proxy.cut();
    const stuck = envelope('order:1');
    const abort = new AbortController();
    setTimeout(() => abort.abort(new Error('lease expired during delivery')), 1500);
    // The proxy stays cut: the send returns only because the signal abandons it.
    const outcomes = await deliverBatch(relay, [stuck], makeContext({ signal: abort.signal }));
    expect(outcomes[0]!.ok).toBe(false);
    const error = (outcomes[0] as { error: unknown }).error;
    expect(error).not.toBeInstanceOf(PermanentError);
    expect(String((error as Error).message)).toMatch(/had not finished when the batch was abandoned/);

    // The client keeps retrying the abandoned send in the background: the next one queues behind it.
    const next = envelope('order:1');
    const delivering = deliverBatch(relay, [stuck, next], makeContext());
    await new Promise((resolve) => setTimeout(resolve, 500));
    await proxy.restore();
    expect(await delivering).toEqual([{ ok: true }, { ok: true }]);

    const reader = await readTopics([topic]);
    try {
      await waitFor(
        () => reader.records.filter((m) => m.id === next.id).length > 0,
        20_000,
        'the next message',
      );
      const ids = reader.records.map((m) => m.id);
      // First deliveries stay in order; the abandoned send may or may not have landed first (a duplicate).
      expect(ids.indexOf(stuck.id)).toBeLessThan(ids.indexOf(next.id));
    } finally {
      await reader.close();
    }
  });

  test('abandoned while its sends wait in the lane: what was in flight fails, what never left is skipped', async () => {
    // One group on each of the topic's three partitions: kafkajs sends each partition on its own.
    const keys = [0, 1, 2].map((partition) => {
      for (let i = 0; ; i += 1) if (javaPartition(`lane-${i}`, 3) === partition) return `lane-${i}`;
    });
    const batch = keys.map((key) => envelope(key));
    await proxy.cut();
    const abort = new AbortController();
    setTimeout(() => abort.abort(new Error('lease expired during delivery')), 1500);
    const outcomes = await deliverBatch(relay, batch, makeContext({ signal: abort.signal }));
    const kinds = outcomes.map((o) => (o.ok ? 'ok' : o.error === SKIPPED ? 'skipped' : 'failed'));
    // @platformatic/kafka sends the batch in one call; kafkajs's first partition was in flight, the
    // other two were still queued behind it.
    expect(kinds).toEqual(
      client === 'kafkajs' ? ['failed', 'skipped', 'skipped'] : ['failed', 'failed', 'failed'],
    );
    await proxy.restore();
    await relay.stop!(); // waits for the abandoned send to finish in the background
    expect(await deliverBatch(relay, batch, makeContext())).toEqual([
      { ok: true },
      { ok: true },
      { ok: true },
    ]);
  });

  test('an already aborted signal sends nothing', async () => {
    const abort = new AbortController();
    abort.abort(new Error('stopping'));
    const before = await recordCount(topic);
    expect(
      await deliverBatch(relay, [envelope('order:2'), envelope(null)], makeContext({ signal: abort.signal })),
    ).toEqual([
      { ok: false, error: SKIPPED },
      { ok: false, error: SKIPPED },
    ]);
    expect(await recordCount(topic)).toBe(before);
  });

  test('start() names an unreachable broker as a misconfiguration', async () => {
    const down = await tcpProxy(BROKER);
    await down.cut();
    const unreachable = clients[client]!(down);
    try {
      const failing = kafkaRelay({ producer: unreachable.adapter, topic, metadataTimeout: 1500 });
      const error = await failing.start!().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(OutboxerError);
      expect((error as OutboxerError).code).toBe('RELAY_MISCONFIGURED');
      expect((error as Error).message).toMatch(/could not reach Kafka/);
      // With startupCheck: false the application starts, and messages wait in the outbox.
      await expect(
        kafkaRelay({ producer: unreachable.adapter, topic, startupCheck: false }).start!(),
      ).resolves.toBeUndefined();
    } finally {
      await unreachable.close().catch(() => undefined);
      await down.cut();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Bad credentials: scripts/services/kafka.sh serves SASL/PLAIN on 127.0.0.1:9094 with one user.
// ---------------------------------------------------------------------------------------------

const SASL = { host: '127.0.0.1', port: 9094, username: 'outboxer', password: 'outboxer-secret' };

/** True when something accepts TCP connections on the SASL listener's port. */
function listening(target: { host: string; port: number }): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(target, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
    socket.setTimeout(1000, () => {
      socket.destroy();
      resolve(false);
    });
  });
}

const saslListening = await listening(SASL);
const NO_SASL =
  'no SASL listener on 127.0.0.1:9094: this Kafka was started without it (by an older scripts/services/kafka.sh, or not by the script at all); `bash scripts/services/kafka.sh start` restarts a broker it started';

/** A client of the SASL listener that logs in as the test user with `password`. */
const saslClients: Record<string, (password: string) => ClientUnderTest> = {
  ...Object.fromEntries(
    runnableLines.map(({ name, kafka }) => [
      name,
      (password: string) => {
        const producer = new kafka.Producer({
          clientId: randomName('outboxer-test'),
          bootstrapBrokers: [`${SASL.host}:${SASL.port}`],
          idempotent: true,
          sasl: { mechanism: 'PLAIN', username: SASL.username, password },
        });
        return { adapter: platformaticProducer(producer), close: () => producer.close() };
      },
    ]),
  ),
  kafkajs: (password) => {
    const kafka = new Kafka({
      clientId: randomName('outboxer-test'),
      brokers: [`${SASL.host}:${SASL.port}`],
      logLevel: logLevel.NOTHING,
      sasl: { mechanism: 'plain', username: SASL.username, password },
    });
    return kafkajsClient(kafka);
  },
};

describe.each(Object.keys(saslClients))('kafka relay (%s) with SASL/PLAIN credentials', (client) => {
  let topic: string;
  beforeAll(async () => {
    topic = await createTopic(1);
  });

  test('the right password: start() succeeds and a message is delivered', async (context) => {
    if (!saslListening) context.skip(NO_SASL);
    const producer = saslClients[client]!(SASL.password);
    try {
      const relay = kafkaRelay({ producer: producer.adapter, topic });
      await relay.start!();
      expect(await deliverBatch(relay, [envelope('sasl:1')], makeContext())).toEqual([{ ok: true }]);
    } finally {
      await producer.close();
    }
  });

  test('a wrong password: start() fails at once with RELAY_MISCONFIGURED naming the authentication, and so does a delivery without the start-up check', async (context) => {
    if (!saslListening) context.skip(NO_SASL);
    const producer = saslClients[client]!('wrong-password');
    try {
      // Refused by the broker, not a timeout (@platformatic/kafka itself retries forever): a
      // timeout would fail with "could not reach Kafka … no answer within", which the message below is not.
      const error = await kafkaRelay({ producer: producer.adapter, topic, metadataTimeout: 10_000 })
        .start!().then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(isOutboxerError(error) && error.code).toBe('RELAY_MISCONFIGURED');
      expect((error as Error).message).toMatch(
        /^Kafka relay "kafka": Kafka refused the SASL authentication of its \S+ producer \((SASL_AUTHENTICATION_FAILED: )?the broker rejected the credentials: check the producer's sasl options\)\. The client said: .*authentication failed/i,
      );

      const relay = kafkaRelay({
        producer: producer.adapter,
        topic,
        startupCheck: false,
        metadataTimeout: 10_000,
      });
      await relay.start!();
      const [outcome] = await deliverBatch(relay, [envelope('sasl:2')], makeContext());
      const failure = (outcome as { ok: false; error: OutboxerError }).error;
      expect(outcome!.ok).toBe(false);
      expect(failure.code).toBe('RELAY_MISCONFIGURED');
      expect(failure.retryable).toBe(true); // fixed credentials and a restart let the message through
      expect(failure.message).toMatch(/credentials/);
      expect(failure.message).toMatch(/authentication failed/i);
    } finally {
      await producer.close().catch(() => undefined);
    }
  });
});
