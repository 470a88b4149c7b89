/**
 * Focused tests of the Kafka relay against the real broker (127.0.0.1:9092), for every client
 * library (each installed major of @platformatic/kafka, and kafkajs): record format, one send in flight, per-message topics, size limits, refusals by the
 * broker, partial failures and what they do to the order of a group.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Kafka, logLevel } from 'kafkajs';
import {
  Outboxer,
  OutboxerError,
  PermanentError,
  SKIPPED,
  type DeliveryOutcome,
  type Envelope,
} from 'outboxer';
import {
  javaPartition,
  kafkajsProducer,
  kafkaRelay,
  platformaticProducer,
  type KafkaClientAdapter,
  type KafkaRelayOptions,
} from 'outboxer/kafka';
import { sqliteFixture } from '../support/databases.js';
import { deliverBatch, makeEnvelope } from '../support/envelopes.js';
import { waitFor } from './contract.js';
import {
  BOOTSTRAP,
  randomName,
  readTopics,
  runnableLines,
  skipUnsupportedLines,
  topicAdmin,
  type ReadRecord,
} from './kafka-support.js';

const { createTopic } = topicAdmin();
skipUnsupportedLines('the Kafka relay delivery tests');

/** A record read back, its value parsed from JSON. */
type Read = Omit<ReadRecord, 'value'> & { value: unknown };

/** Reads until `ids` arrived, waits a little more for strays, and returns everything read. */
async function readBack(names: string[], ids: number[]): Promise<Read[]> {
  const reader = await readTopics(names);
  try {
    await waitFor(
      () => ids.every((id) => reader.records.some((m) => m.id === id)),
      20_000,
      `messages ${ids.join(', ')}`,
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    return reader.records.map((record) => ({ ...record, value: JSON.parse(record.value) }));
  } finally {
    await reader.close();
  }
}

interface ClientUnderTest {
  readonly adapter: KafkaClientAdapter;
  /** Calls to the client's send method in flight, and the most seen at once. */
  readonly sends: { inFlight: number; max: number; total: number };
  close(): Promise<void>;
}

function observe<T extends object, K extends keyof T>(
  target: T,
  method: K,
  sends: ClientUnderTest['sends'],
): void {
  const original = (target[method] as (...args: unknown[]) => Promise<unknown>).bind(target);
  (target as Record<K, unknown>)[method] = async (...args: unknown[]) => {
    sends.inFlight += 1;
    sends.total += 1;
    sends.max = Math.max(sends.max, sends.inFlight);
    try {
      return await original(...args);
    } finally {
      sends.inFlight -= 1;
    }
  };
}

const clients: Record<string, () => ClientUnderTest> = {
  ...Object.fromEntries(
    runnableLines.map(({ name, kafka }) => [
      name,
      () => {
        const producer = new kafka.Producer({
          clientId: randomName('outboxer-test'),
          bootstrapBrokers: [BOOTSTRAP],
          idempotent: true,
        });
        const sends = { inFlight: 0, max: 0, total: 0 };
        observe(producer, 'send', sends);
        return { adapter: platformaticProducer(producer), sends, close: () => producer.close() };
      },
    ]),
  ),
  kafkajs: () => {
    const kafka = new Kafka({
      clientId: randomName('outboxer-test'),
      brokers: [BOOTSTRAP],
      logLevel: logLevel.NOTHING,
    });
    const producer = kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
    });
    const kafkaAdmin = kafka.admin();
    const sends = { inFlight: 0, max: 0, total: 0 };
    observe(producer, 'sendBatch', sends);
    return {
      adapter: kafkajsProducer(producer, { admin: kafkaAdmin }),
      sends,
      close: async () => {
        await producer.disconnect();
        await kafkaAdmin.disconnect();
      },
    };
  },
};

function envelope(
  groupKey: string | null,
  payload: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Envelope {
  const message = makeEnvelope({ groupKey, type: 'test.event', headers });
  return { ...message, payload: { id: message.id, ...payload } };
}

/** Group keys that the Java partitioner puts on partitions 0, 1 and 2 of a 3-partition topic. */
function keysOnPartitions(): [string, string, string] {
  const found: string[] = [];
  for (let i = 0; found.length < 3; i += 1)
    if (javaPartition(`grp-${i}`, 3) === found.length) found.push(`grp-${i}`);
  return found as [string, string, string];
}

const errorOf = (outcome: DeliveryOutcome | undefined): unknown =>
  (outcome as { error?: unknown } | undefined)?.error;

describe('kafkaRelay options', () => {
  const adapter = clients[runnableLines[0]!.name]!;
  let client: ClientUnderTest;
  beforeAll(() => void (client = adapter()));
  afterAll(() => client.close());

  test.each<[string, Record<string, unknown>, RegExp]>([
    ['no producer', { producer: undefined, topic: 't' }, /options\.producer must be platformaticProducer/],
    ['an unknown option', { topic: 't', acks: 1 }, /options\.acks must be one of the known options/],
    [
      'a bad topic name',
      { topic: 'orders and more' },
      /options\.topic must be a Kafka topic name .*ASCII letters/,
    ],
    ['a tiny maxBytes', { topic: 't', maxBytes: 10 }, /options\.maxBytes must be an integer from 1024/],
    [
      'a metadataTimeout that is not a number',
      { topic: 't', metadataTimeout: '5s' },
      /options\.metadataTimeout must be an integer/,
    ],
    [
      'a startupCheck that is not a boolean',
      { topic: 't', startupCheck: 'yes' },
      /options\.startupCheck must be true or false/,
    ],
  ])('rejects %s', (_what, options, message) => {
    const attempt = () =>
      kafkaRelay({ producer: client.adapter, ...options } as unknown as KafkaRelayOptions);
    expect(attempt).toThrow(message);
    expect(attempt).toThrow(expect.objectContaining({ code: 'INVALID_OPTIONS' }));
  });

  test('kafkajsProducer wants an idempotent producer and an admin client', () => {
    const kafka = new Kafka({ brokers: [BOOTSTRAP], logLevel: logLevel.NOTHING });
    expect(() => kafkajsProducer(kafka.producer(), { admin: kafka.admin() })).toThrow(
      /not idempotent.*idempotent: true, maxInFlightRequests: 1/,
    );
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    expect(() => kafkajsProducer(producer, {} as never)).toThrow(/options\.admin must be a kafkajs Admin/);
    expect(() => platformaticProducer({} as never)).toThrow(/expected a Producer from @platformatic\/kafka/);
  });
});

describe.each(Object.keys(clients))('kafka relay through %s', (name) => {
  let client: ClientUnderTest;
  let topic: string;
  beforeAll(async () => {
    client = clients[name]!();
    topic = await createTopic(3);
  });
  afterAll(() => client.close());

  test('sends the group key as the record key, on the Java partition, with the JSON payload and the standard headers', async () => {
    const relay = kafkaRelay({ producer: client.adapter, topic });
    await relay.start!();
    const keyed = envelope('order:42', { total: 12.5, items: ['a', 'é'] }, { traceparent: '00-abc-01' });
    const unkeyed = envelope(null, { audit: true });
    expect(await deliverBatch(relay, [keyed, unkeyed])).toEqual([{ ok: true }, { ok: true }]);
    const read = await readBack([topic], [keyed.id, unkeyed.id]);
    const first = read.find((m) => m.id === keyed.id)!;
    expect(first).toMatchObject({
      key: 'order:42',
      partition: javaPartition('order:42', 3),
      value: { id: keyed.id, total: 12.5, items: ['a', 'é'] },
    });
    expect(first.headers).toEqual({
      traceparent: '00-abc-01',
      'outboxer-id': String(keyed.id),
      'outboxer-outbox': 'events',
      'outboxer-type': 'test.event',
      'outboxer-group-key': 'order:42',
    });
    const second = read.find((m) => m.id === unkeyed.id)!;
    expect(second.key).toBeNull();
    expect(second.headers['outboxer-group-key']).toBeUndefined();
  });

  test('keeps one send in flight per producer, even when two relays share it', async () => {
    const relays = [
      kafkaRelay({ producer: client.adapter, topic }),
      kafkaRelay({ producer: client.adapter, topic, name: 'second' }),
    ];
    client.sends.max = 0;
    const batches = Array.from({ length: 6 }, (_, i) =>
      Array.from({ length: 5 }, (_, j) => envelope(`k${i}-${j}`)),
    );
    const results = await Promise.all(batches.map((batch, i) => deliverBatch(relays[i % 2]!, batch)));
    for (const outcomes of results) expect(outcomes.every((o) => o.ok)).toBe(true);
    expect(client.sends.max).toBe(1);
  });

  test('batches waiting for the producer go out together, every group in order', async () => {
    const relays = [
      kafkaRelay({ producer: client.adapter, topic }),
      kafkaRelay({ producer: client.adapter, topic, name: 'second' }),
    ];
    // Started, so neither waits for the topic's partition count: the batches queue together.
    for (const relay of relays) await relay.start!();
    client.sends.max = 0;
    // Six batches, as six partitions of an outbox would hand over: each its own groups, three
    // messages a group, the groups spread over the topic's three partitions.
    const batches = Array.from({ length: 6 }, (_, b) =>
      Array.from({ length: 4 }, (_, g) => [0, 1, 2].map((n) => envelope(`merge-${b}-${g}`, { n }))).flat(),
    );
    const apart = batches.reduce(
      (sum, batch) =>
        sum + (name === 'kafkajs' ? new Set(batch.map((m) => javaPartition(m.groupKey!, 3))).size : 1),
      0,
    );
    const before = client.sends.total;
    const results = await Promise.all(batches.map((batch, i) => deliverBatch(relays[i % 2]!, batch)));
    for (const outcomes of results) expect(outcomes.every((o) => o.ok)).toBe(true);
    expect(client.sends.max).toBe(1);
    // Sent one batch at a time, they would take `apart` calls; the first goes alone, the rest wait
    // behind it and share calls.
    expect(client.sends.total - before).toBeLessThanOrEqual(Math.ceil(apart / 2));
    const sent = batches.flat();
    const read = await readBack(
      [topic],
      sent.map((m) => m.id),
    );
    for (const key of new Set(sent.map((m) => m.groupKey!))) {
      const expected = sent.filter((m) => m.groupKey === key).map((m) => m.id);
      expect(read.filter((m) => m.key === key).map((m) => m.id)).toEqual(expected);
      expect(new Set(read.filter((m) => m.key === key).map((m) => m.partition))).toEqual(
        new Set([javaPartition(key, 3)]),
      );
    }
  });

  test('sends a batch in one call, and splits it only where maxBytes says so', async () => {
    const relay = kafkaRelay({ producer: client.adapter, topic, maxBytes: 4096 });
    const [key] = keysOnPartitions();
    const batch = Array.from({ length: 10 }, () => envelope(key, { text: 'x'.repeat(1000) }));
    const before = client.sends.total;
    expect((await deliverBatch(relay, batch)).every((o) => o.ok)).toBe(true);
    expect(client.sends.total - before).toBeGreaterThanOrEqual(3);
    const read = await readBack(
      [topic],
      batch.map((m) => m.id),
    );
    const ids = read.filter((m) => m.key === key).map((m) => m.id);
    expect(ids.slice(-10)).toEqual(batch.map((m) => m.id));

    const small = Array.from({ length: 10 }, (_, i) => envelope(`small-${i}`));
    const beforeSmall = client.sends.total;
    expect(
      (await deliverBatch(kafkaRelay({ producer: client.adapter, topic }), small)).every((o) => o.ok),
    ).toBe(true);
    // One call for the batch; kafkajs takes one topic-partition per call (3 partitions here).
    expect(client.sends.total - beforeSmall).toBe(
      name === 'kafkajs' ? new Set(small.map((m) => javaPartition(m.groupKey!, 3))).size : 1,
    );
  });

  test('fails a message bigger than maxBytes for good before sending it, and holds back the rest of its group', async () => {
    const relay = kafkaRelay({ producer: client.adapter, topic, maxBytes: 2048 });
    const outcomes = await deliverBatch(relay, [
      envelope('big', { text: 'x'.repeat(5000) }),
      envelope('big'),
      envelope('other'),
    ]);
    expect(errorOf(outcomes[0])).toBeInstanceOf(PermanentError);
    expect(String((errorOf(outcomes[0]) as Error).message)).toMatch(
      /more than the relay's maxBytes \(2048\)/,
    );
    expect(outcomes.slice(1)).toEqual([{ ok: false, error: SKIPPED }, { ok: true }]);
  });

  test('a topic chosen per message that does not exist fails only its messages, as a retryable misconfiguration', async () => {
    const missing = randomName('outboxer-missing');
    const relay = kafkaRelay({
      producer: client.adapter,
      topic: (m) => (m.payload as { to: string }).to,
      metadataTimeout: 1500,
    });
    const batch = [
      envelope('g1', { to: missing }),
      envelope('g1', { to: topic }),
      envelope('g2', { to: topic }),
      envelope(null, { to: missing }),
    ];
    const outcomes = await deliverBatch(relay, batch);
    for (const index of [0, 3]) {
      const error = errorOf(outcomes[index]) as OutboxerError;
      expect(error.code).toBe('RELAY_MISCONFIGURED');
      expect(error.retryable).toBe(true);
      expect(error.message).toContain(missing);
    }
    expect(outcomes[1]).toEqual({ ok: false, error: SKIPPED });
    expect(outcomes[2]).toEqual({ ok: true });
  });

  test('start() reports a missing fixed topic as RELAY_MISCONFIGURED', async () => {
    const missing = randomName('outboxer-missing');
    const error = await kafkaRelay({ producer: client.adapter, topic: missing, metadataTimeout: 1500 })
      .start!().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as OutboxerError).code).toBe('RELAY_MISCONFIGURED');
    expect((error as Error).message).toContain(missing);
  });

  test('a batch the broker refuses as too large is retried one message at a time; the culprit goes dead, its group goes on, and the next batch of a partly written send is not lost', async () => {
    const limited = await createTopic(3, 2048);
    const [onP0, onP1, onP2] = keysOnPartitions();
    const fixture = sqliteFixture();
    const relay = kafkaRelay({ producer: client.adapter, topic: limited });
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: { events: { relay, table: 'kafka_too_large', maxAttempts: 3 } },
      testing: 'manual',
    });
    try {
      await outboxer.migrate();
      const publish = (groupKey: string, payload: Record<string, unknown>) => {
        let id = 0;
        fixture.db.transaction(
          () => void (id = outboxer.publish(fixture.db, 'events', payload, { groupKey }) as number),
        )();
        return id;
      };
      const a1 = publish(onP0, { n: 'a1' });
      const b1 = publish(onP1, { n: 'b1', text: 'x'.repeat(4000) }); // under maxBytes, over the topic's limit
      const b2 = publish(onP1, { n: 'b2' });
      const c1 = publish(onP2, { n: 'c1' });
      const result = await outboxer.drain('events');
      expect(result.dead.map((d) => d.envelope.id)).toEqual([b1]);
      expect(result.dead[0]!.error).toMatch(
        /PermanentError: Kafka rejected the message for good .*MESSAGE_TOO_LARGE/,
      );
      expect(result.retried.map((r) => r.envelope.id)).toEqual([b1]); // first refused together with b2
      expect(result.retried[0]!.error).toMatch(/one at a time/);
      expect(result.delivered.map((m) => m.id).sort((x, y) => x - y)).toEqual([a1, b2, c1]);

      // Regression: a client that kept its sequence numbers after the partly written send would have
      // the broker drop this one-record batch to partition 0 as a duplicate of a1.
      const a2 = publish(onP0, { n: 'a2' });
      expect((await outboxer.drain('events')).delivered.map((m) => m.id)).toEqual([a2]);
      const read = await readBack([limited], [a1, b2, c1, a2]);
      expect(read.some((m) => m.id === b1)).toBe(false);
      expect(read.filter((m) => m.partition === 0).map((m) => m.id)).toEqual([a1, a2]);
    } finally {
      await outboxer.close();
      await fixture.close();
    }
  });

  test('when one topic refuses a message, the later message of its group is reported skipped even where it was written', async () => {
    const limited = await createTopic(1, 2048);
    const relay = kafkaRelay({
      producer: client.adapter,
      topic: (m) => ((m.payload as { big?: boolean }).big === true ? limited : topic),
    });
    const refused = envelope('order:7', { big: true, text: 'x'.repeat(4000) });
    const after = envelope('order:7');
    const other = envelope('order:8');
    const outcomes = await deliverBatch(relay, [refused, after, other]);
    expect(errorOf(outcomes[0])).toBeInstanceOf(PermanentError);
    expect(outcomes.slice(1)).toEqual([{ ok: false, error: SKIPPED }, { ok: true }]);
    const read = await readBack([topic], [other.id]);
    // @platformatic/kafka sent both topics in one request: `after` was written and will be sent again
    // (a duplicate), never acknowledged ahead of `refused`. kafkajs sends one partition per call and
    // stops a group at its first failure, so `after` was not sent.
    expect(read.some((m) => m.id === after.id)).toBe(name !== 'kafkajs');
  });
});
