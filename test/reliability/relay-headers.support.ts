/**
 * Shared by the relay-headers properties: nasty header sets, `encodeMessage` as the oracle of what
 * `publish` accepts (with the Postgres dialect's capabilities), envelopes as the engine builds them
 * from a stored row, and the checks every relay's outgoing headers must pass.
 */
import fc from 'fast-check';
import { expect } from 'vitest';
import type { Envelope } from 'outboxer';
import { encodeMessage } from '../../src/core/encoding.js';
import { PermanentError } from '../../src/core/errors.js';
import { resolveOutbox } from '../../src/core/options.js';
import { postgresDialect } from '../../src/dialects/postgres/postgres-dialect.js';
import { parseHeaders } from '../../src/dialects/shared/columns.js';

export const RUNS = Number(process.env.PROPERTY_RUNS ?? 200);
/** Runs of a property that talks to a real broker: bounded, whatever PROPERTY_RUNS says. */
export const BROKER_RUNS = Math.min(30, RUNS);

const OUTBOX = resolveOutbox('events', {}, { relaying: false, schema: undefined });
/** The strictest dialect: Postgres also refuses NUL characters. */
export const CAPABILITIES = postgresDialect.capabilities;

export type Headers = Record<string, string>;

/** One message as published: its own headers, group key, type, and where it lands (id, outbox). */
export interface Published {
  readonly headers: Headers;
  readonly groupKey: string | null;
  readonly type: string | null;
  readonly id: number;
  readonly outbox: string;
}

/** An accepted message and the headers `publish` stored for it (the JSON column, read back). */
export interface Accepted extends Published {
  readonly stored: Headers;
}

/** The headers `publish` stores for a message, or the error it refuses it with. */
export function oracle(
  headers: unknown,
  groupKey: string | null = null,
  type: string | null = null,
): { stored: Headers } | { error: unknown } {
  try {
    const row = encodeMessage(
      OUTBOX,
      { n: 1 },
      { headers: headers as Headers, groupKey, type },
      CAPABILITIES,
    );
    return { stored: parseHeaders(row.headers) };
  } catch (error) {
    return { error };
  }
}

/** 'stored', or the code of the error `publish` refuses the message with. */
export const outcome = (result: ReturnType<typeof oracle>): string =>
  'stored' in result ? 'stored' : String((result.error as { code?: unknown }).code);

export const accepts = (headers: unknown, groupKey: string | null = null, type: string | null = null) =>
  'stored' in oracle(headers, groupKey, type);

export const isReserved = (name: string): boolean => name.toLowerCase().startsWith('outboxer-');
export const utf8 = (text: string): number => Buffer.byteLength(text, 'utf8');
const hasLineBreak = (text: string | null): boolean => text !== null && /[\r\n]/.test(text);

/**
 * Why `publish` must refuse a message whatever else it holds, or undefined: a header name in
 * outboxer's namespace, empty or over 255 UTF-8 bytes, or a group key or type with CR or LF.
 */
export function certainRefusal(headers: Headers, groupKey: string | null, type: string | null) {
  const names = Object.keys(headers);
  if (names.some(isReserved)) return 'reserved header name';
  if (names.some((name) => name === '' || utf8(name) > 255)) return 'header name empty or over 255 bytes';
  if (hasLineBreak(groupKey)) return 'group key with CR or LF';
  if (hasLineBreak(type)) return 'type with CR or LF';
  return undefined;
}

// ------------------------------------------------------------------------------------------------
// Arbitraries

/** `text` with each letter in a random case: `OuTbOxEr-Id`. */
const randomCase = (text: string) =>
  fc
    .array(fc.boolean(), { minLength: text.length, maxLength: text.length })
    .map((upper) => [...text].map((c, i) => (upper[i] ? c.toUpperCase() : c.toLowerCase())).join(''));

export const reservedNameArb = fc
  .constantFrom(
    'outboxer-id',
    'outboxer-outbox',
    'outboxer-type',
    'outboxer-group-key',
    'outboxer-headers',
    'outboxer-',
    'outboxer-trace',
  )
  .chain(randomCase);

const tokenArb = fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,16}$/);
const oddPiece = fc.constantFrom(
  ...[' ', ':', '\r', '\n', '\0', '\t', '\x7f', '\x01', '\x1b', '"', '(', ',', '/', ';', '=', '@'],
  ...['[', '{', '\\', 'é', 'ÿ', 'Ā', '🎉', '\uD800', '\uDFFF', '\u2028', '\uFEFF', '\u00a0'],
  ...['\uFFFE', 'ſ', 'İ', '\u212a', '\u202e', '%', '%41'],
);
const prototypeName = fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf');
const specialName = fc.constantFrom(
  ...['', 'traceparent', 'content-length', 'Content-Type', 'content-type', 'X-Trace', 'x-trace'],
  ...['Transfer-Encoding', 'connection', 'x b', 'a..b', '.a', 'a.', '1', '0', '42'],
  ...['user-agent', 'authorization', 'webhook-id', 'Webhook-Signature', 'WEBHOOK-TIMESTAMP'],
  ...['Nats-Msg-Id', 'nats-rollup', 'x-death', 'CC', 'BCC', 'cc', 'Bcc', 'aws.trace', 'Amazon.x'],
  ...['n'.repeat(254), 'n'.repeat(255), 'n'.repeat(256), 'é'.repeat(127), 'é'.repeat(128)],
  ...['🎉'.repeat(64), 'outboxer', 'outboxerid', 'outboxer_id', 'x-outboxer-id', 'outboxer\u2011id'],
);
/**
 * Names of 253 to 257 UTF-8 bytes, around the 255-byte limit: ASCII, or 2-, 3- and 4-byte
 * characters before or after ASCII padding (so a multi-byte character may straddle the limit).
 */
export const nameOfBytesArb = fc
  .tuple(
    fc.constantFrom(253, 254, 255, 256, 257),
    fc.array(fc.constantFrom('é', 'ÿ', '€', 'İ', '🎉'), { maxLength: 70 }),
    fc.boolean(),
  )
  .map(([bytes, wide, wideFirst]) => {
    let text = '';
    for (const c of wide) if (utf8(text + c) <= bytes) text += c;
    const padding = 'n'.repeat(bytes - utf8(text));
    return wideFirst ? text + padding : padding + text;
  });
export const headerNameArb = fc.oneof(
  { weight: 4, arbitrary: tokenArb },
  { weight: 2, arbitrary: specialName },
  { weight: 1, arbitrary: prototypeName },
  { weight: 2, arbitrary: reservedNameArb },
  { weight: 1, arbitrary: nameOfBytesArb },
  {
    weight: 3,
    arbitrary: fc.array(fc.oneof(tokenArb, oddPiece), { minLength: 1, maxLength: 4 }).map((p) => p.join('')),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 8 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 8 }) },
);

const oddValue = fc.constantFrom(
  ...['', ' ', '  x  ', '\t', '\tx\t', 'a\rb', 'a\nb', 'a\0b', '\x01', '\x7f', '\u00a0', 'é', 'ÿ'],
  ...['Ā', '🎉', '\uD800', '\uDFFF', '\uFFFE', '\u2028', '%', '%41', ':', 'a: b', '{"x":1}', '"'],
  ...['\\', '\u202e', '999', '1', 'v'.repeat(4000)],
);
export const headerValueArb = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 20 }) },
  { weight: 3, arbitrary: oddValue },
  {
    weight: 2,
    arbitrary: fc
      .array(fc.oneof(fc.string({ maxLength: 6 }), oddValue), { maxLength: 4 })
      .map((p) => p.join('')),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }) },
  { weight: 1, arbitrary: fc.string({ minLength: 1000, maxLength: 6000 }) },
);

/** Header objects as a caller may pass them, null-prototype ones included. */
const headerSetArb = fc.oneof(
  fc.dictionary(headerNameArb, headerValueArb, { maxKeys: 12 }),
  // Tamer ones, that more relays can send: HTTP token names, printable Latin-1 values.
  fc.dictionary(
    fc.oneof(
      { weight: 3, arbitrary: tokenArb },
      { weight: 3, arbitrary: fc.stringMatching(/^[A-Za-z0-9_-]{1,16}$/) },
      prototypeName,
      specialName,
      reservedNameArb,
      nameOfBytesArb,
    ),
    fc.oneof(fc.stringMatching(/^[\x20-\x7e\xa0-\xff]{0,30}$/), headerValueArb),
    { maxKeys: 6 },
  ),
);

/** Some sets also get a twin of one of their names in another case (`Trace` beside `trace`). */
export const rawHeadersArb = fc
  .tuple(headerSetArb, fc.nat(), fc.boolean(), headerValueArb)
  .map(([generated, pick, twin, value]) => {
    // A copy: fast-check may hand the generated object to this function again while shrinking.
    const headers: Headers =
      Object.getPrototypeOf(generated) === null
        ? Object.assign(Object.create(null) as Headers, generated)
        : { ...generated };
    const names = Object.keys(headers);
    const name = names[pick % Math.max(names.length, 1)];
    const other =
      name === undefined ? name : name === name.toUpperCase() ? name.toLowerCase() : name.toUpperCase();
    if (twin && other !== undefined && other !== name)
      Object.defineProperty(headers, other, { value, enumerable: true, writable: true, configurable: true });
    return headers;
  });

/** Group keys and types: mostly fine, some with spaces, CR or LF, unicode or over the limits. */
const textArb = (max: number) =>
  fc.oneof(
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.string({ maxLength: 5 }), fc.constantFrom('\r', '\n', '\r\n'), fc.string({ maxLength: 5 }))
        .map((p) => p.join('')),
    },
    { weight: 4, arbitrary: fc.string({ minLength: 1, maxLength: 20 }) },
    { weight: 2, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }) },
    {
      weight: 2,
      arbitrary: fc
        .array(fc.oneof(fc.string({ maxLength: 5 }), oddValue), { minLength: 1, maxLength: 3 })
        .map((p) => p.join('').slice(0, max)),
    },
    { weight: 1, arbitrary: fc.constantFrom(' k ', 'k ', ' k', '%', 'é'.repeat(max), 'k'.repeat(max)) },
  );
export const groupKeyArb = fc.option(textArb(256), { nil: null, freq: 3 });
export const typeArb = fc.option(textArb(200), { nil: null, freq: 3 });
export const idArb = fc.oneof(
  fc.integer({ min: 1, max: 1000 }),
  fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
);
export const outboxArb = fc.stringMatching(/^[A-Za-z0-9_.-]{1,30}$/);

/** Keeps the entries `publish` accepts one by one (in a null-prototype object when given one). */
function acceptedEntries(headers: Headers): Headers {
  const kept = Object.entries(headers).filter(([name, value]) =>
    accepts(Object.fromEntries([[name, value]])),
  );
  return Object.getPrototypeOf(headers) === null
    ? Object.assign(Object.create(null) as Headers, Object.fromEntries(kept))
    : Object.fromEntries(kept);
}

/** Messages as a caller may publish them (headers, group key and type not checked). */
export const publishedArb: fc.Arbitrary<Published> = fc.record({
  headers: rawHeadersArb,
  groupKey: groupKeyArb,
  type: typeArb,
  id: idArb,
  outbox: outboxArb,
});

/**
 * Messages `publish` accepts, each with what it stored: the raw header sets cut down to the entries
 * the oracle accepts, then only whole messages the oracle accepts (a set can still be too large,
 * a group key or type refused).
 */
export const acceptedFrom = (published: fc.Arbitrary<Published>): fc.Arbitrary<Accepted> =>
  published
    .map((m) => ({ ...m, headers: acceptedEntries(m.headers) }))
    .map((m) => ({ ...m, result: oracle(m.headers, m.groupKey, m.type) }))
    .filter((m): m is typeof m & { result: { stored: Headers } } => 'stored' in m.result)
    .map(({ result, ...m }) => ({ ...m, stored: result.stored }));
export const acceptedArb = acceptedFrom(publishedArb);

/**
 * What the generators failed to produce in a sample (an empty list when all is well): names of
 * 254, 255 and 256 UTF-8 bytes, ASCII and multi-byte, and group keys and types with CR or LF.
 */
export function missedLimits(samples = 1000): string[] {
  const names = fc.sample(rawHeadersArb, samples).flatMap((headers) => Object.keys(headers));
  const texts = (arbitrary: fc.Arbitrary<string | null>) =>
    fc.sample(arbitrary, samples).filter(hasLineBreak);
  const wanted: Array<[string, boolean]> = [254, 255, 256].flatMap((bytes) => [
    [`ASCII names of ${bytes} bytes`, names.some((name) => name.length === bytes && utf8(name) === bytes)],
    [`multi-byte names of ${bytes} bytes`, names.some((name) => name.length < bytes && utf8(name) === bytes)],
  ]);
  wanted.push(['group keys with CR or LF', texts(groupKeyArb).length > 0]);
  wanted.push(['types with CR or LF', texts(typeArb).length > 0]);
  return wanted.filter(([, reached]) => !reached).map(([what]) => what);
}

/** Headers in outboxer's namespace, as a row written by hand (or before the check) may hold them. */
export const storedReservedArb = fc.dictionary(
  reservedNameArb,
  fc.oneof(headerValueArb, fc.constantFrom('0', '1', '999', 'spoofed', 'orders')),
  { minKeys: 1, maxKeys: 5 },
);

/** The envelope the engine hands a relay for a stored row. */
export function envelopeOf(message: Published, headers: Headers): Envelope {
  return {
    id: message.id,
    outbox: message.outbox,
    type: message.type,
    groupKey: message.groupKey,
    partition: 0,
    payload: { n: 1 },
    headers,
    attempts: 0,
    lastError: null,
    nextAttemptAt: null,
    failingSince: null,
    insertedAt: new Date('2026-01-02T03:04:05Z'),
  };
}

// ------------------------------------------------------------------------------------------------
// Checks

/** Outgoing headers as name/value pairs, duplicates kept. */
export type Sent = ReadonlyArray<readonly [string, string]>;

const byNameThenValue = (a: readonly [string, string], b: readonly [string, string]): number =>
  a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0;
export const sorted = (pairs: Iterable<readonly [string, string]>) => [...pairs].sort(byNameThenValue);

/**
 * (b) No spoofing: exactly one header per outboxer name, in lower case, with outboxer's value
 * (`outboxer-id` = the outbox id…), and no other header, in any case, in outboxer's namespace.
 * `encode` is how the relay or the broker turns a type or group key into a header value;
 * `exempt` names a relay's own header in the namespace (SQS's `outboxer-headers`).
 */
export function expectNoSpoofing(
  sent: Sent,
  envelope: Envelope,
  encode: (value: string) => string = (value) => value,
  exempt: readonly string[] = [],
): void {
  const expected: Headers = { 'outboxer-id': String(envelope.id), 'outboxer-outbox': envelope.outbox };
  if (envelope.type !== null) expected['outboxer-type'] = encode(envelope.type);
  if (envelope.groupKey !== null) expected['outboxer-group-key'] = encode(envelope.groupKey);
  const claimed = sent.filter(([name]) => isReserved(name) && !exempt.includes(name));
  expect(sorted(claimed), "headers in outboxer's namespace").toEqual(sorted(Object.entries(expected)));
}

/** (c) The message's own headers, every one with its exact name and value, and nothing else. */
export function expectOwnHeaders(sentOwn: Sent, own: Headers): void {
  expect(sorted(sentOwn), "the message's own headers").toEqual(sorted(Object.entries(own)));
}

/** The stored headers without outboxer's namespace: what a relay must carry as the message's own. */
export function withoutReserved(headers: Headers): Headers {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !isReserved(name)));
}

/**
 * NATS (docs/relays/nats.md): header names are printable ASCII. (Values, group keys and types with
 * CR or LF never get this far: `publish` refuses them.)
 */
export function natsRefusal(own: Headers): string | undefined {
  if (Object.keys(own).some((name) => /[^\x21-\x7e]/.test(name))) return 'header name not printable ASCII';
  return undefined;
}

/** What `build` returns, or the PermanentError it throws (anything else is thrown on). */
export function refusedOr<T>(build: () => T): T | PermanentError {
  try {
    return build();
  } catch (error) {
    if (error instanceof PermanentError) return error;
    throw error;
  }
}

/** Counts of what a property saw (refusal reasons…), printed once its describe block is done. */
export class Tally {
  private readonly counts = new Map<string, number>();
  add(what: string): void {
    this.counts.set(what, (this.counts.get(what) ?? 0) + 1);
  }
  get(what: string): number {
    return this.counts.get(what) ?? 0;
  }
  toString(): string {
    return [...this.counts].map(([what, count]) => `${what}: ${count}`).join('; ');
  }
}
