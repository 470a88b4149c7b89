/**
 * Every relay's header building, fuzzed (fast-check) with the header sets `publish` accepts:
 * nasty names and values (reserved names in any case, CR/LF/NUL, ':', spaces, unicode, emoji,
 * lone surrogates, long values, `__proto__`, names around 255 bytes…), with `encodeMessage` as the
 * oracle of acceptance. For each accepted set, each relay's pure builder (NATS: the relay itself
 * over a recording JetStream client) must (a) not throw, or refuse with a PermanentError for a
 * documented reason only (RabbitMQ: a `CC` or `BCC` header); (b) send `outboxer-id` = the outbox id
 * and let no other header claim outboxer's namespace (webhook: `outboxer-type` and
 * `outboxer-group-key` decode back to the originals); (c) carry every own header with its exact
 * name and value (webhook: lower-cased names, trimmed values; NATS: trimmed values; SQS: in
 * `outboxer-headers` when they cannot be attributes). Rows stored with reserved names (by hand, or
 * before `publish` checked) must send the same as without.
 * The brokers themselves: relay-headers.brokers.property.test.ts.
 */
import fc from 'fast-check';
import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import { afterAll, describe, expect, test } from 'vitest';
import type { Envelope } from 'outboxer';
import { OutboxerError, PermanentError } from '../../src/core/errors.js';
import { resolveBullmqOptions } from '../../src/relays/bullmq/bullmq-options.js';
import { draftRecords, toRecord } from '../../src/relays/kafka/kafka-records.js';
import { natsRelay } from '../../src/relays/nats/nats-relay.js';
import { resolvePgBossOptions } from '../../src/relays/pg-boss/pg-boss-options.js';
import { resolveRabbitMqOptions } from '../../src/relays/rabbitmq/rabbitmq-options.js';
import { toAmqpMessage } from '../../src/relays/rabbitmq/rabbitmq-publish.js';
import { entryFields } from '../../src/relays/redis-streams/redis-streams-client.js';
import {
  messageAttributes,
  PACKED_HEADERS_ATTRIBUTE,
  prepareEntry,
} from '../../src/relays/sqs/sqs-message.js';
import { resolveSqsOptions } from '../../src/relays/sqs/sqs-options.js';
import {
  buildHeaders,
  encodeHeaderText,
  parseTarget,
  type Target,
} from '../../src/relays/webhook/webhook-request.js';
import { makeContext } from '../support/envelopes.js';
import {
  RUNS,
  Tally,
  acceptedArb,
  certainRefusal,
  envelopeOf,
  expectNoSpoofing,
  expectOwnHeaders,
  groupKeyArb,
  isReserved,
  missedLimits,
  natsRefusal,
  oracle,
  outcome,
  rawHeadersArb,
  refusedOr,
  sorted,
  storedReservedArb,
  typeArb,
  withoutReserved,
  type Headers,
  type Sent,
} from './relay-headers.support.js';

/** What a relay makes of an envelope's headers, checked the same way for every relay. */
interface Probe {
  readonly name: string;
  /** The outgoing headers, or the PermanentError the relay refuses the message with. */
  send(envelope: Envelope): Sent | PermanentError | Promise<Sent | PermanentError>;
  /** The documented reason the relay must refuse these own headers for, or undefined. */
  refusal?(own: Headers, envelope: Envelope): string | undefined;
  /** The own headers as they must arrive (default: exactly as stored). */
  expectedOwn?(own: Headers): Sent;
  /** The own headers among the sent ones (default: every name outside outboxer's namespace). */
  ownOf?(sent: Sent): Sent;
  /** How a type or group key becomes a header value (default: as is). */
  encode?(value: string): string;
  /** Names in outboxer's namespace the relay itself sets besides the four standard ones. */
  exempt?: readonly string[];
  /** Further checks of what was sent. */
  also?(sent: Sent, envelope: Envelope): void;
}

const tallies = new Map<string, Tally>();
const tally = (probe: string) => tallies.get(probe) ?? tallies.set(probe, new Tally()).get(probe)!;
afterAll(() => {
  for (const [probe, counts] of tallies) console.info(`relay-headers ${probe}: ${counts}`);
});

const entries = (headers: Readonly<Record<string, string>>): Sent => Object.entries(headers);

// ------------------------------------------------------------------------------------------------
// The relays' builders

const NOT_TOKEN = /[^!#$%&'*+.^_`|~0-9A-Za-z-]/;
const FRAMING = ['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'expect'];
const webhookTarget = parseTarget('https://receiver.example/hooks') as Target;
const webhookOwn = { 'webhook-id': 'relay-id', 'webhook-timestamp': '1767225600' };
const webhookHeaders = (envelope: Envelope) =>
  buildHeaders({ envelope, configured: new Map(), target: webhookTarget, webhook: webhookOwn });

/** Webhook (docs/relays/webhook.md, "What is sent"): why a message's own header cannot go over HTTP. */
function webhookProblem(name: string, value: string): string | undefined {
  if (name.toLowerCase().startsWith('webhook-')) return undefined; // dropped, not refused
  if (name === '' || NOT_TOKEN.test(name)) return 'name: not an HTTP token';
  const trimmed = value.trim();
  if (/[\r\n\0]/.test(trimmed)) return 'value: CR, LF or NUL';
  if (/[^\x00-\xff]/.test(trimmed)) return 'value: above U+00FF';
  if (/[^\t\x20-\x7e\x80-\xff]/.test(trimmed)) return 'value: other control character';
  if (FRAMING.includes(name.toLowerCase())) return 'framing header';
  return undefined;
}

const webhook: Probe = {
  name: 'webhook',
  send: (envelope) => refusedOr(() => entries(webhookHeaders(envelope))),
  refusal: (own) =>
    Object.entries(own)
      .map(([n, v]) => webhookProblem(n, v))
      .find(Boolean),
  // Lower-cased and trimmed; the defaults unless overridden; a later own header wins over an
  // earlier one whose name differs only in case (the count shows how often that happened).
  expectedOwn(own) {
    const sent = new Map([
      ['content-type', 'application/json'],
      ['user-agent', 'outboxer-webhook'],
    ]);
    const lower = Object.keys(own).map((name) => name.toLowerCase());
    if (new Set(lower).size < lower.length)
      tally('webhook').add('own names equal but for case (last one sent)');
    for (const [name, value] of Object.entries(own)) {
      if (!name.toLowerCase().startsWith('webhook-')) sent.set(name.toLowerCase(), value.trim());
    }
    return [...sent];
  },
  ownOf: (sent) => sent.filter(([name]) => !isReserved(name) && !name.startsWith('webhook-')),
  // As documented: printable ASCII without '%' as is, else percent-encoded UTF-8.
  encode: (value) => encodeHeaderText(value),
  also(sent, envelope) {
    expect(sorted(sent.filter(([name]) => name.startsWith('webhook-')))).toEqual(sorted(entries(webhookOwn)));
    for (const [name] of sent) expect(name).toBe(name.toLowerCase());
    // decodeURIComponent gives the type and group key back, spaces around them included.
    const decoded = (name: string) => sent.filter(([n]) => n === name).map(([, v]) => decodeURIComponent(v));
    expect(decoded('outboxer-type')).toEqual(envelope.type === null ? [] : [envelope.type]);
    expect(decoded('outboxer-group-key')).toEqual(envelope.groupKey === null ? [] : [envelope.groupKey]);
  },
};

const kafka: Probe = {
  name: 'kafka',
  send(envelope) {
    const [draft] = draftRecords([envelope], 'group', () => 'events', 64 * 1024 * 1024);
    expect(draft!.state, String(draft!.error)).toBe('ready');
    return entries(toRecord(draft!).headers);
  },
};

// Attribute names SQS takes (docs/relays/sqs.md, "The 10-attribute limit").
const SQS_NAME = /^(?!\.)(?!.*\.\.)(?!.*\.$)(?!aws\.|amazon\.)[A-Za-z0-9_.-]{1,256}$/i;
const NOT_XML = /[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;
const sqsOptions = resolveSqsOptions({
  client: { send: async () => ({}) },
  queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/events',
});

const sqs: Probe = {
  name: 'sqs',
  send(envelope) {
    const attributes = messageAttributes(envelope);
    for (const attribute of Object.values(attributes)) {
      expect(attribute.DataType).toBe('String');
      expect(typeof attribute.StringValue).toBe('string');
    }
    const sent = Object.entries(attributes).map(([name, a]) => [name, a.StringValue] as const);
    // The whole entry: refused (PermanentError) exactly when an attribute holds a character
    // outside XML 1.0 (documented); else it carries these very attributes.
    const prepared = prepareEntry(envelope, sqsOptions, makeContext(), 1024 * 1024);
    if (sent.some(([, value]) => NOT_XML.test(value))) {
      expect(prepared).toBeInstanceOf(PermanentError);
      tally('sqs').add('entry refused: attribute value outside XML 1.0');
    } else {
      expect(prepared).not.toBeInstanceOf(Error);
      expect((prepared as { entry: { MessageAttributes: unknown } }).entry.MessageAttributes).toEqual(
        attributes,
      );
    }
    return sent;
  },
  exempt: [PACKED_HEADERS_ATTRIBUTE],
  ownOf(sent) {
    const packed = sent.find(([name]) => name === PACKED_HEADERS_ATTRIBUTE);
    const separate = sent.filter(([name]) => !isReserved(name));
    if (packed === undefined) return separate;
    expect(separate, 'no own attribute beside outboxer-headers').toEqual([]);
    return entries(JSON.parse(packed[1]) as Headers);
  },
  also(sent, envelope) {
    const own = entries(withoutReserved(envelope.headers));
    const standard = 2 + Number(envelope.type !== null) + Number(envelope.groupKey !== null);
    const fits =
      own.length + standard <= 10 && own.every(([name, value]) => SQS_NAME.test(name) && value.length > 0);
    const packed = sent.some(([name]) => name === PACKED_HEADERS_ATTRIBUTE);
    expect(packed, 'packed exactly when the own headers cannot be attributes').toBe(own.length > 0 && !fits);
    expect(sent.length).toBeLessThanOrEqual(10);
    if (packed) tally('sqs').add('packed into outboxer-headers');
  },
};

const rabbitOptions = resolveRabbitMqOptions({
  connection: { createConfirmChannel: async () => ({}) },
  exchange: 'events',
  routingKey: 'events',
});

const rabbitmq: Probe = {
  name: 'rabbitmq',
  send(envelope) {
    const message = refusedOr(() => toAmqpMessage(envelope, rabbitOptions));
    if (message instanceof PermanentError) return message;
    expect(message.properties.type).toBe(envelope.type ?? undefined);
    expect(message.properties.messageId).toBe(String(envelope.id));
    return entries(message.properties.headers);
  },
  // docs/relays/rabbitmq.md: RabbitMQ reads these two names as extra routing keys.
  refusal: (own) => (Object.hasOwn(own, 'CC') || Object.hasOwn(own, 'BCC') ? 'header CC or BCC' : undefined),
};

const redisStreams: Probe = {
  name: 'redis-streams',
  send(envelope) {
    const fields = entryFields(envelope);
    const pairs = fields.flatMap((field, i) => (i % 2 === 0 ? [[field, fields[i + 1]!] as const] : []));
    const names = ['id', 'outbox', 'type', 'groupKey', 'payload', 'headers'];
    expect(pairs.map(([name]) => name)).toEqual(
      names.filter(
        (n) => !(n === 'type' && envelope.type === null) && !(n === 'groupKey' && envelope.groupKey === null),
      ),
    );
    const field = new Map(pairs);
    expect(field.get('id')).toBe(String(envelope.id));
    expect(field.get('outbox')).toBe(envelope.outbox);
    expect(field.get('type')).toBe(envelope.type ?? undefined);
    expect(field.get('groupKey')).toBe(envelope.groupKey ?? undefined);
    return entries(JSON.parse(field.get('headers')!) as Headers);
  },
};

const bullmqOptions = resolveBullmqOptions({ queue: { name: 'events', addBulk: async () => [] } });
const bullmq: Probe = {
  name: 'bullmq',
  send: (envelope) => entries((bullmqOptions.build(envelope).data as { headers: Headers }).headers),
};

const pgBossOptions = resolvePgBossOptions({
  boss: { insert: async () => undefined, getQueue: async () => null },
  queue: 'events',
});
const pgBoss: Probe = {
  name: 'pg-boss',
  send: (envelope) => entries((pgBossOptions.build(envelope).data as { headers: Headers }).headers),
};

/** The NATS relay over a JetStream client that records what it was asked to publish. */
let natsPublished: MsgHdrs | undefined;
const natsRelayUnderTest = natsRelay({
  jetstream: {
    publish: async (_subject, _payload, options) => {
      natsPublished = options.headers;
      return { stream: 'EVENTS', seq: 1, duplicate: false };
    },
    jetstreamManager: async () => ({ streams: { find: async () => 'EVENTS' } }),
  },
  createHeaders: natsHeaders,
  subject: 'outboxer.events',
});

const nats: Probe = {
  name: 'nats',
  async send(envelope) {
    natsPublished = undefined;
    const [outcome] = (await natsRelayUnderTest.deliver([envelope], makeContext())) as [
      { ok: boolean; error?: unknown },
    ];
    if (!outcome.ok) {
      if (outcome.error instanceof PermanentError) return outcome.error;
      throw outcome.error;
    }
    return [...natsPublished!].flatMap(([name, values]) => values.map((value) => [name, value] as const));
  },
  refusal: natsRefusal,
  expectedOwn: (own) => Object.entries(own).map(([name, value]) => [name, value.trim()]),
  encode: (value) => value.trim(), // documented: NATS trims spaces around header values
};

const probes: readonly Probe[] = [webhook, kafka, sqs, rabbitmq, redisStreams, bullmq, pgBoss, nats];

/** (a), (b) and (c) for one relay and one envelope; returns what was sent (or the refusal). */
async function check(probe: Probe, envelope: Envelope): Promise<Sent | PermanentError> {
  const own = withoutReserved(envelope.headers);
  const reason = probe.refusal?.(own, envelope);
  const sent = await probe.send(envelope);
  if (reason !== undefined) {
    expect(sent, `refused: ${reason}`).toBeInstanceOf(PermanentError);
    tally(probe.name).add(`refused (${reason})`);
    return sent;
  }
  expect(sent, 'sent, not refused').not.toBeInstanceOf(Error);
  const pairs = sent as Sent;
  expectNoSpoofing(pairs, envelope, probe.encode, probe.exempt);
  expectOwnHeaders(
    probe.ownOf?.(pairs) ?? pairs.filter(([name]) => !isReserved(name)),
    Object.fromEntries(probe.expectedOwn?.(own) ?? entries(own)),
  );
  probe.also?.(pairs, envelope);
  tally(probe.name).add('sent');
  return pairs;
}

// ------------------------------------------------------------------------------------------------

describe('relay headers: the oracle (encodeMessage)', () => {
  test('any header set is stored as given or refused (INVALID_MESSAGE); refused whenever certainRefusal says', () => {
    fc.assert(
      fc.property(rawHeadersArb, groupKeyArb, typeArb, (headers, groupKey, type) => {
        const result = oracle(headers, groupKey, type);
        const reason = certainRefusal(headers, groupKey, type);
        if ('error' in result) {
          expect(result.error).toBeInstanceOf(OutboxerError);
          expect((result.error as OutboxerError).code).toBe('INVALID_MESSAGE');
          tally('oracle').add(`refused (${reason ?? 'another reason'})`);
          return;
        }
        expect(reason, 'accepted').toBeUndefined();
        expect(sorted(entries(result.stored))).toEqual(sorted(entries(headers)));
        tally('oracle').add(Object.hasOwn(headers, '__proto__') ? 'stored, with "__proto__"' : 'stored');
      }),
      { numRuns: RUNS },
    );
  });

  test('an own "__proto__" header is a header like any other: stored, or refused if not a string', () => {
    const result = oracle(JSON.parse('{"__proto__":"x","a":"b"}'));
    const stored = [['__proto__', 'x'] as const, ['a', 'b'] as const];
    expect('stored' in result && sorted(entries(result.stored))).toEqual(stored);
    expect(outcome(oracle(JSON.parse('{"__proto__":{"x":1}}')))).toBe('INVALID_MESSAGE');
  });

  test('header names are 1 to 255 UTF-8 bytes, multi-byte characters counted in bytes', () => {
    for (const name of ['n'.repeat(255), 'é'.repeat(127) + 'n', 'n'.repeat(251) + '🎉', '€'.repeat(85)])
      expect(outcome(oracle({ [name]: 'v' })), name).toBe('stored');
    for (const name of ['', 'n'.repeat(256), 'é'.repeat(128), 'n'.repeat(252) + '🎉', '€'.repeat(85) + 'n'])
      expect(outcome(oracle({ [name]: 'v' })), name).toBe('INVALID_MESSAGE');
  });

  test('a group key or type with CR or LF is refused, as relays send them as headers', () => {
    for (const text of ['a\rb', 'a\nb', '\r\n', 'k\n']) {
      expect(outcome(oracle({}, text, null)), JSON.stringify(text)).toBe('INVALID_MESSAGE');
      expect(outcome(oracle({}, null, text)), JSON.stringify(text)).toBe('INVALID_MESSAGE');
    }
    expect(outcome(oracle({}, ' k\t', ' order paid '))).toBe('stored');
  });

  test('the generators reach the limits: names of 254-256 bytes (multi-byte too), CR/LF in group keys and types', () => {
    expect(missedLimits()).toEqual([]);
  });
});

describe.each(probes)('relay headers, pure: $name', (probe) => {
  test('accepted header sets: (a) no throw, (b) no spoofing, (c) own headers intact', async () => {
    await fc.assert(
      fc.asyncProperty(acceptedArb, async (message) => {
        await check(probe, envelopeOf(message, message.stored));
      }),
      { numRuns: RUNS },
    );
  });

  test('stored headers in outboxer namespace are dropped: the same is sent as without them', async () => {
    await fc.assert(
      fc.asyncProperty(acceptedArb, storedReservedArb, fc.boolean(), async (message, reserved, first) => {
        const stored = first ? { ...reserved, ...message.stored } : { ...message.stored, ...reserved };
        const spoofed = await check(probe, envelopeOf(message, stored));
        const clean = await probe.send(envelopeOf(message, message.stored));
        if (clean instanceof Error) expect((spoofed as Error).message).toBe(clean.message);
        else expect(sorted(spoofed as Sent)).toEqual(sorted(clean));
      }),
      { numRuns: RUNS },
    );
  });
});

// A type or group key with spaces around it is percent-encoded, so nothing trims them on the way.
test('webhook outboxer-group-key of " k " decodes back to " k "', () => {
  const message = { headers: {}, groupKey: ' k ', type: 'order paid ', id: 7, outbox: 'events' };
  const headers = webhookHeaders(envelopeOf(message, {}));
  expect(decodeURIComponent(headers['outboxer-group-key']!)).toBe(' k ');
  expect(decodeURIComponent(headers['outboxer-type']!)).toBe('order paid ');
});
