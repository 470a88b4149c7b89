/**
 * Header sets `publish` accepts, published through a real outboxer instance on SQLite and read
 * back from the real brokers: NATS JetStream (127.0.0.1:4222), RabbitMQ (5672) and Redis Streams
 * (6379). At most 30 runs per broker. What arrives must carry `outboxer-id` = the outbox id, no
 * other header in outboxer's namespace, and every own header with its name and value (NATS trims
 * values, as documented); a message the broker cannot carry must go dead with a PermanentError for
 * a documented reason, and nothing be retried. RabbitMQ: many of the messages get a `CC` or `BCC`
 * header, which is refused for that message alone, and every message goes with a plain companion
 * in the same wave, which must be delivered whatever becomes of the other. The brokers must run
 * (`npm run services`): a missing one fails its block rather than skipping it.
 * The pure builders, with many more runs: relay-headers.property.test.ts.
 */
import fc from 'fast-check';
import { connect as connectNats, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import amqp, { type Channel, type ChannelModel, type GetMessage } from 'amqplib';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, PermanentError, type Envelope, type Relay } from 'outboxer';
import { natsRelay } from 'outboxer/nats';
import { rabbitmqRelay } from 'outboxer/rabbitmq';
import { redisStreamsRelay } from 'outboxer/redis-streams';
import { sqliteFixture } from '../support/databases.js';
import { makeContext } from '../support/envelopes.js';
import {
  BROKER_RUNS,
  Tally,
  acceptedArb,
  acceptedFrom,
  envelopeOf,
  expectNoSpoofing,
  expectOwnHeaders,
  isReserved,
  natsRefusal,
  publishedArb,
  sorted,
  utf8,
  withoutReserved,
  type Accepted,
  type Headers,
  type Sent,
} from './relay-headers.support.js';

const random = () => Math.random().toString(36).slice(2, 10);

/**
 * What became of a published message: delivered (as the relay was handed it), or dead (and why);
 * `companion`: the id of the plain message published with it, if any.
 */
type Outcome = ({ delivered: Envelope } | { dead: string }) & { id: number; companion?: number | undefined };

/** The headers of a companion message. */
const COMPANION: Headers = { companion: 'yes' };

/**
 * An outboxer instance on a fresh SQLite file, relaying outbox `events` through `relay`; `send`
 * publishes one message (and, with `companion`, a plain one after it, in the same batch), drains,
 * and says whether the message was delivered or went dead (and why). Nothing may be retried.
 */
async function instance(relay: Relay) {
  const fixture = sqliteFixture();
  const outboxer = new Outboxer({
    database: fixture.database,
    testing: 'manual',
    outboxes: { events: { relay, maxAttempts: 3 } },
  }) as Outboxer<never, boolean>;
  await outboxer.migrate();
  return {
    async send(message: Accepted, companion = false): Promise<Outcome> {
      const { headers, groupKey, type } = message;
      const publish = (payload: unknown, options: object) =>
        Number(outboxer.publish(fixture.db as never, 'events', payload, options));
      // better-sqlite3: publish runs inside the caller's (synchronous) transaction.
      const [id, other] = fixture.db.transaction((): [number, number | undefined] => [
        publish({ n: 1 }, { headers, groupKey, type }),
        companion ? publish({ n: 2 }, { headers: COMPANION }) : undefined,
      ])();
      const result = await outboxer.drain('events', { maxRounds: 10 });
      expect(result.pending, 'nothing left pending').toBe(0);
      expect(
        result.retried.map((r) => r.error),
        'nothing retried',
      ).toEqual([]);
      const delivered = (id: number) => result.delivered.find((e) => e.id === id);
      if (other !== undefined) expect(delivered(other), 'the companion delivered').toBeDefined();
      const dead = result.dead.find((d) => d.envelope.id === id);
      if (dead !== undefined) return { id, companion: other, dead: dead.error };
      expect(delivered(id), `message ${id} delivered`).toBeDefined();
      // What the relay was handed is what was stored.
      expect(delivered(id)!.headers).toEqual(message.stored);
      return { id, companion: other, delivered: delivered(id)! };
    },
    async close() {
      await outboxer.close();
      await fixture.close();
    },
  };
}

/**
 * Runs the property for one broker: each accepted message is delivered and read back (then
 * checked by `readBack`), or goes dead exactly when `refusal` names a documented reason, with a
 * PermanentError whose text matches `refusedText`.
 */
async function property(
  broker: string,
  send: (message: Accepted) => Promise<Outcome>,
  arbitrary: fc.Arbitrary<Accepted>,
  refusal: (message: Accepted) => string | undefined,
  refusedText: RegExp,
  readBack: (id: number, envelope: Envelope) => Promise<void>,
): Promise<void> {
  const tally = new Tally();
  await fc.assert(
    fc.asyncProperty(arbitrary, async (message) => {
      const reason = refusal(message);
      const outcome = await send(message);
      if (reason !== undefined) {
        expect('dead' in outcome ? outcome.dead : 'delivered', `dead: ${reason}`).toMatch(refusedText);
        tally.add(`dead (${reason})`);
        return;
      }
      expect('dead' in outcome ? outcome.dead : '', 'not dead').toBe('');
      await readBack(outcome.id, (outcome as { delivered: Envelope }).delivered);
      tally.add('delivered and read back');
    }),
    { numRuns: BROKER_RUNS },
  );
  console.info(`relay-headers ${broker} (end to end): ${tally}`);
}

// ------------------------------------------------------------------------------------------------

describe('relay headers end to end: NATS JetStream', () => {
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const stream = `OUTBOXER_HEADERS_${random().toUpperCase()}`;
  const subject = `outboxer.headers.${random()}`;
  let outbox: Awaited<ReturnType<typeof instance>>;

  beforeAll(async () => {
    nc = await connectNats({ servers: '127.0.0.1:4222' });
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: stream, subjects: [subject] });
    outbox = await instance(natsRelay({ jetstream: jetstream(nc), createHeaders: natsHeaders, subject }));
  });
  afterAll(async () => {
    await outbox?.close();
    await jsm?.streams.delete(stream);
    await nc?.close();
  });

  test(`accepted header sets arrive intact, or go dead for a documented reason (${BROKER_RUNS} runs)`, async () => {
    await property(
      'NATS',
      (message) => outbox.send(message),
      // Names `Nats-…` are JetStream directives, documented as "do not publish unless you mean them".
      acceptedArb.filter((m) => !Object.keys(m.stored).some((name) => /^nats-/i.test(name))),
      (m) => natsRefusal(withoutReserved(m.stored)),
      /^(PermanentError: )?NATS cannot send the message: /,
      async (id, envelope) => {
        const stored = await jsm.streams.getMessage(stream, { last_by_subj: subject });
        const sent: Sent = [...stored!.header].flatMap(([name, values]) =>
          values.map((v) => [name, v] as const),
        );
        expect(sent.filter(([name]) => name === 'Nats-Msg-Id')).toEqual([['Nats-Msg-Id', String(id)]]);
        const rest = sent.filter(([name]) => name !== 'Nats-Msg-Id');
        expectNoSpoofing(rest, envelope, (value) => value.trim());
        const own = withoutReserved(envelope.headers);
        expectOwnHeaders(
          rest.filter(([name]) => !isReserved(name)),
          Object.fromEntries(Object.entries(own).map(([name, value]) => [name, value.trim()])),
        );
      },
    );
  }, 180_000);
});

// ------------------------------------------------------------------------------------------------

/** RabbitMQ (docs/relays/rabbitmq.md): why the relay refuses a message before sending, or undefined. */
function rabbitRefusal(message: Accepted): string | undefined {
  const own = withoutReserved(message.stored);
  if (Object.hasOwn(own, 'CC') || Object.hasOwn(own, 'BCC')) return 'header CC or BCC';
  if (message.type !== null && utf8(message.type) > 255) return 'type over 255 bytes';
  return undefined;
}

/** Accepted messages, many of them with a "CC" or "BCC" header (sender-selected distribution). */
const withSenderSelectedArb = acceptedFrom(
  fc
    .tuple(
      publishedArb,
      fc.oneof({ weight: 2, arbitrary: fc.constant(null) }, fc.constantFrom('CC', 'BCC')),
      fc.constantFrom('', 'x', 'orders'),
    )
    .map(([m, name, value]) => (name === null ? m : { ...m, headers: { ...m.headers, [name]: value } })),
);

describe('relay headers end to end: RabbitMQ', () => {
  let connection: ChannelModel;
  let admin: Channel;
  const exchange = `outboxer-headers-${random()}`;
  let queue: string;
  let outbox: Awaited<ReturnType<typeof instance>>;
  const relayOf = () => rabbitmqRelay({ connection, exchange, routingKey: 'events', timeout: 10_000 });
  /**
   * The headers the relay handed amqplib, by message id. amqplib's reader assigns the fields it
   * reads into a plain object, where a "__proto__" field cannot land: that one name is checked here.
   */
  const handed = new Map<string, Headers>();

  beforeAll(async () => {
    connection = await amqp.connect('amqp://guest:guest@127.0.0.1:5672');
    const open = connection.createConfirmChannel.bind(connection);
    connection.createConfirmChannel = async () => {
      const channel = await open();
      const publish = channel.publish.bind(channel);
      channel.publish = (exchange, key, content, options, callback) => {
        handed.set(String(options?.messageId), { ...(options?.headers as Headers) });
        return publish(exchange, key, content, options, callback);
      };
      return channel;
    };
    admin = await connection.createChannel();
    await admin.assertExchange(exchange, 'direct', { durable: false, autoDelete: false });
    ({ queue } = await admin.assertQueue('', { exclusive: true }));
    await admin.bindQueue(queue, exchange, 'events');
    outbox = await instance(relayOf());
  });
  afterAll(async () => {
    await outbox?.close();
    await admin?.deleteExchange(exchange);
    await connection?.close();
  });

  /** Messages read from the queue and not yet taken, by message id. */
  const received = new Map<string, GetMessage>();
  /** The message of this id from the queue (it was confirmed, so it is there; polled a little all the same). */
  async function take(id: number): Promise<GetMessage> {
    for (let attempt = 0; attempt < 50; attempt += 1) {
      const found = received.get(String(id));
      if (found !== undefined) {
        received.delete(String(id));
        return found;
      }
      const message = await admin.get(queue, { noAck: true });
      if (message !== false) received.set(String(message.properties.messageId), message);
      else await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`message ${id} not in the queue after the confirm`);
  }

  test(`accepted header sets arrive intact, or go dead for a documented reason (${BROKER_RUNS} runs)`, async () => {
    await property(
      'RabbitMQ',
      async (message) => {
        const outcome = await outbox.send(message, true);
        expect((await take(outcome.companion!)).properties.headers).toMatchObject(COMPANION);
        return outcome;
      },
      withSenderSelectedArb,
      rabbitRefusal,
      /^(PermanentError: )?(amqplib cannot encode the message: |Message \d+ has a header named "B?CC")/,
      async (id, envelope) => {
        const sent = Object.entries((await take(id)).properties.headers ?? {}) as Array<[string, unknown]>;
        for (const [name, value] of sent) expect(typeof value, name).toBe('string');
        const handedOver: Sent = Object.entries(handed.get(String(id))!);
        expect(sorted(sent as Sent), 'what the broker holds').toEqual(
          sorted(handedOver.filter(([name]) => name !== '__proto__')),
        );
        expectNoSpoofing(handedOver, envelope);
        expectOwnHeaders(
          handedOver.filter(([name]) => !isReserved(name)),
          withoutReserved(envelope.headers),
        );
      },
    );
  }, 180_000);

  test('a "CC" or "BCC" header is a PermanentError for its message alone; the rest of the wave is sent', async () => {
    const relay = relayOf();
    await relay.start!();
    try {
      const ids = [900_000_001, 900_000_002, 900_000_003];
      const wave = ([{ CC: 'x' }, { cc: 'x' }, { BCC: 'x' }] as Headers[]).map((headers, i) =>
        envelopeOf({ headers, groupKey: null, type: null, id: ids[i]!, outbox: 'events' }, headers),
      );
      const outcomes = (await relay.deliver(wave, makeContext())) as Array<{ ok: boolean; error?: unknown }>;
      expect(outcomes.map((o) => o.ok)).toEqual([false, true, false]);
      expect(outcomes[0]!.error).toBeInstanceOf(PermanentError);
      expect(outcomes[2]!.error).toBeInstanceOf(PermanentError);
      expect((await take(ids[1]!)).properties.headers).toMatchObject({ cc: 'x' });
    } finally {
      await relay.stop!();
    }
  });
});

// ------------------------------------------------------------------------------------------------

describe('relay headers end to end: Redis Streams', () => {
  let redis: Redis;
  const key = `outboxer:test:headers:${random()}`;
  let outbox: Awaited<ReturnType<typeof instance>>;

  beforeAll(async () => {
    redis = new Redis({ host: '127.0.0.1', port: 6379 });
    outbox = await instance(redisStreamsRelay({ redis, stream: key }));
  });
  afterAll(async () => {
    await outbox?.close();
    await redis?.del(key);
    await redis?.quit();
  });

  test(`accepted header sets arrive intact (${BROKER_RUNS} runs)`, async () => {
    await property(
      'Redis Streams',
      (message) => outbox.send(message),
      acceptedArb,
      () => undefined,
      /^$/,
      async (id, envelope) => {
        const [last] = await redis.xrevrange(key, '+', '-', 'COUNT', 1);
        const fields = last![1];
        const field = new Map(fields.flatMap((f, i) => (i % 2 === 0 ? [[f, fields[i + 1]!] as const] : [])));
        expect(field.get('id')).toBe(String(id));
        expect(field.get('type')).toBe(envelope.type ?? undefined);
        expect(field.get('groupKey')).toBe(envelope.groupKey ?? undefined);
        const sent: Sent = Object.entries(JSON.parse(field.get('headers')!) as Headers);
        expectNoSpoofing(sent, envelope);
        expectOwnHeaders(
          sent.filter(([name]) => !isReserved(name)),
          withoutReserved(envelope.headers),
        );
      },
    );
  }, 180_000);
});
