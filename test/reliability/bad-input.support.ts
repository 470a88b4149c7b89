/**
 * What the bad-input property tests share: the documented rules an input is judged by (the codes
 * it deserves, docs/errors.md), and the fast-check arbitraries of nasty payloads, group keys,
 * headers and types.
 */
import fc from 'fast-check';
import { type ErrorCode } from 'outboxer';

export const MAX_PAYLOAD = 2048;
export const PARTITIONS = 4;
export const RUNS = Number(process.env.PROPERTY_RUNS ?? 120);

export interface Input {
  payload: unknown;
  groupKey?: unknown;
  headers?: unknown;
  type?: unknown;
}

/** The codes an input deserves, from the documented rules (docs/errors.md); empty = accepted. */
export function expectedCodes(input: Input, postgres: boolean): Set<ErrorCode> {
  const codes = new Set<ErrorCode>();
  const badText = (s: string): boolean => !s.isWellFormed() || (postgres && s.includes('\0'));
  const key = input.groupKey;
  if (key !== null && key !== undefined) {
    if (
      typeof key !== 'string' ||
      key === '' ||
      badText(key) ||
      /[\r\n]/.test(key) ||
      Buffer.byteLength(key) > 512
    )
      codes.add('INVALID_MESSAGE');
  }
  const type = input.type;
  if (type !== null && type !== undefined) {
    if (typeof type !== 'string' || type === '' || type.length > 200 || badText(type) || /[\r\n]/.test(type))
      codes.add('INVALID_MESSAGE');
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(input.payload);
  } catch {
    codes.add('PAYLOAD_NOT_ENCODABLE');
  }
  if (json === undefined || (json !== undefined && losesData(input.payload, '')))
    codes.add('PAYLOAD_NOT_ENCODABLE');
  else if (Buffer.byteLength(json) > MAX_PAYLOAD) codes.add('PAYLOAD_TOO_LARGE');
  const headers = input.headers;
  if (headers !== null && headers !== undefined) {
    const prototype = typeof headers === 'object' ? (Object.getPrototypeOf(headers) as unknown) : undefined;
    if (prototype !== Object.prototype && prototype !== null) codes.add('INVALID_MESSAGE');
    else {
      const entries = Object.entries(headers);
      const badName = (k: string) =>
        k.length === 0 || Buffer.byteLength(k) > 255 || /[\x00-\x20\x7f:]/.test(k) || /^outboxer-/i.test(k);
      if (
        entries.some(
          ([k, v]) => typeof v !== 'string' || badText(k) || badText(v) || badName(k) || /[\r\n\0]/.test(v),
        )
      )
        codes.add('INVALID_MESSAGE');
      else if (entries.length > 0 && Buffer.byteLength(JSON.stringify(headers)) > 16_384)
        codes.add('INVALID_MESSAGE');
    }
  }
  return codes;
}

/**
 * Whether JSON would silently lose part of a value (docs/reliability.md, "Bad input"): a NaN or
 * ±Infinity, or an object other than a plain object or array that encodes to `{}` (a Map, a Set,
 * an empty typed array…). A walk of its own, beside the engine's replacer, to judge it.
 */
function losesData(value: unknown, key: string): boolean {
  let v = value;
  if (typeof v === 'object' && v !== null && typeof (v as { toJSON?: unknown }).toJSON === 'function')
    v = (v as { toJSON(key: string): unknown }).toJSON(key);
  if (v instanceof Number) v = v.valueOf();
  if (typeof v === 'number') return !Number.isFinite(v);
  if (typeof v !== 'object' || v === null || v instanceof String || v instanceof Boolean) return false;
  if (Array.isArray(v)) return v.some((item, i) => losesData(item, String(i)));
  const prototype = Object.getPrototypeOf(v) as unknown;
  if (prototype !== Object.prototype && prototype !== null && Object.keys(v).length === 0) return true;
  return Object.keys(v).some((k) => losesData((v as Record<string, unknown>)[k], k));
}

// ------------------------------------------------------------------------------------------------
// Arbitraries

const nasty = fc.constantFrom(
  "'); DROP TABLE orders; --",
  '$1',
  '$$ $tag$',
  '\\',
  '"',
  '\u0000',
  '\uD800',
  '\uDFFF',
  '🎉',
  '\u202e',
  'NULL',
  '/* */',
  '\r\n',
);
const text = (maxLength: number) =>
  fc.oneof(
    fc.string({ unit: 'binary', maxLength }),
    fc.string({ unit: 'grapheme', maxLength }),
    fc.array(fc.oneof(nasty, fc.string({ maxLength: 5 })), { maxLength: 6 }).map((parts) => parts.join('')),
  );

export const payloadArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue(),
  fc.anything({
    withBigInt: true,
    withBoxedValues: true,
    withDate: true,
    withMap: true,
    withSet: true,
    withNullPrototype: true,
    withObjectString: true,
    withSparseArray: true,
    withTypedArray: true,
    withUnicodeString: true,
  }),
  fc.dictionary(text(20), text(100)),
  text(3000).map((s) => ({ big: s })),
  fc.constantFrom(undefined, () => 1, Symbol('s'), 10n, -0, NaN, Infinity),
);

export const groupKeyArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, undefined, '', 'k'.repeat(512), 'k'.repeat(513), 'é'.repeat(256), 'é'.repeat(257)),
  text(60),
  fc.string({ unit: 'grapheme', minLength: 100, maxLength: 300 }),
  fc.string({ minLength: 500, maxLength: 530 }),
  fc.oneof(fc.integer(), fc.boolean(), fc.object(), fc.array(fc.string()), fc.constant(Symbol('k'))),
);

export const headersArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(undefined, null, {}),
  fc.dictionary(text(15), text(40), { maxKeys: 5 }),
  fc.dictionary(
    fc.string({ maxLength: 10 }),
    fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.object()),
    {
      maxKeys: 4,
    },
  ),
  fc.string({ minLength: 16_000, maxLength: 17_000 }).map((value) => ({ big: value })),
  fc.oneof(fc.string(), fc.integer(), fc.array(fc.string())),
);

export const typeArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(undefined, null, '', 't'.repeat(200), 't'.repeat(201)),
  text(30),
  fc.oneof(fc.integer(), fc.object()),
);
