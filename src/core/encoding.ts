import type { DialectCapabilities, InsertRow } from './database.js';
import { describeError, OutboxerError } from './errors.js';
import type { ResolvedOutbox } from './options.js';
import { choosePartition } from './partitioning.js';
import { orderingKey } from './relay.js';
import type { Envelope, Headers } from './relay.js';

/** Longest group key in UTF-8 bytes: keys live in btree indexes, whose entries are bounded. */
export const MAX_GROUP_KEY_BYTES = 512;
const MAX_TYPE_LENGTH = 200;
const MAX_HEADER_BYTES = 16_384;

export interface PublishOptions {
  /** Messages with the same key are delivered in order; `null`/absent = unordered. */
  groupKey?: string | null;
  headers?: Headers;
  /** A type name stored with the message (set for you by {@link defineMessage}). */
  type?: string | null;
}

/**
 * Checks and encodes one message for the insert. Everything that could make the database reject
 * the statement is refused here first, because a failed statement aborts the user's whole
 * transaction on Postgres.
 */
export function encodeMessage(
  outbox: ResolvedOutbox,
  payload: unknown,
  options: PublishOptions,
  capabilities: DialectCapabilities,
  sharedHeaders?: unknown,
): InsertRow {
  const groupKey = checkGroupKey(outbox.name, options.groupKey, capabilities);
  const type = checkType(outbox.name, options.type, capabilities);
  const encodedPayload = encodeJson(outbox.name, payload, 'payload');
  const bytes = Buffer.byteLength(encodedPayload, 'utf8');
  if (bytes > outbox.maxPayloadBytes) {
    throw new OutboxerError(
      'PAYLOAD_TOO_LARGE',
      `Payload for outbox "${outbox.name}" is ${bytes} bytes encoded, over maxPayloadBytes (${outbox.maxPayloadBytes}). Store large data elsewhere and publish a reference, or raise outboxes.${outbox.name}.maxPayloadBytes.`,
    );
  }
  const headers = encodeHeaders(outbox.name, options.headers, sharedHeaders, capabilities);
  const partition = choosePartition(
    orderingKey({ groupKey } as Envelope, outbox.ordering),
    outbox.partitions,
  );
  return { outbox: outbox.name, partition, groupKey, type, payload: encodedPayload, headers };
}

function invalid(outbox: string, message: string): OutboxerError {
  return new OutboxerError('INVALID_MESSAGE', `Message for outbox "${outbox}": ${message}`);
}

function checkText(outbox: string, what: string, value: string, capabilities: DialectCapabilities): void {
  if (!value.isWellFormed()) {
    throw invalid(
      outbox,
      `${what} contains an unpaired UTF-16 surrogate, which cannot be stored as UTF-8 text.`,
    );
  }
  if (capabilities.rejectsNulCharacters && value.includes('\0')) {
    throw invalid(outbox, `${what} contains a NUL character (U+0000), which Postgres cannot store in text.`);
  }
}

/** Relays send the group key and the type as headers, and a header line ends at CR or LF. */
function checkLine(outbox: string, what: string, value: string): void {
  if (/[\r\n]/.test(value)) {
    throw invalid(outbox, `${what} contains a CR or LF character, which relays cannot send as a header.`);
  }
}

function checkGroupKey(outbox: string, key: unknown, capabilities: DialectCapabilities): string | null {
  if (key === null || key === undefined) return null;
  if (typeof key !== 'string') {
    throw invalid(outbox, `groupKey must be a string, null or undefined; got ${typeof key}.`);
  }
  if (key.length === 0)
    throw invalid(outbox, 'groupKey must not be empty; use null for an unordered message.');
  checkText(outbox, 'groupKey', key, capabilities);
  checkLine(outbox, 'groupKey', key);
  if (Buffer.byteLength(key, 'utf8') > MAX_GROUP_KEY_BYTES) {
    throw invalid(
      outbox,
      `groupKey is longer than ${MAX_GROUP_KEY_BYTES} bytes; use a shorter key or a hash of it.`,
    );
  }
  return key;
}

function checkType(outbox: string, type: unknown, capabilities: DialectCapabilities): string | null {
  if (type === null || type === undefined) return null;
  if (typeof type !== 'string' || type.length === 0 || type.length > MAX_TYPE_LENGTH) {
    throw invalid(outbox, `type must be a non-empty string of at most ${MAX_TYPE_LENGTH} characters.`);
  }
  checkText(outbox, 'type', type, capabilities);
  checkLine(outbox, 'type', type);
  return type;
}

function encodeJson(outbox: string, value: unknown, what: string): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
    // Only a `null` or a `{}` in the text can stand for a value JSON lost: the walk that finds
    // which is paid for by those payloads alone.
    if (json !== undefined && (json.includes('null') || json.includes('{}'))) {
      JSON.stringify(value, refuseLossy);
    }
  } catch (error) {
    if (error instanceof LossyValue) {
      throw new OutboxerError(
        'PAYLOAD_NOT_ENCODABLE',
        `The ${what} for outbox "${outbox}" holds ${error.message}, which JSON would turn into ${error.becomes} and so lose. Convert it first (e.g. Object.fromEntries(map), [...set], String(number)).`,
      );
    }
    throw new OutboxerError(
      'PAYLOAD_NOT_ENCODABLE',
      `The ${what} for outbox "${outbox}" cannot be encoded as JSON (${describeError(error, 500)}). BigInt values and circular references are the usual cause: convert them first.`,
      { cause: error },
    );
  }
  if (json === undefined) {
    throw new OutboxerError(
      'PAYLOAD_NOT_ENCODABLE',
      `The ${what} for outbox "${outbox}" encodes to nothing in JSON (undefined, a function or a symbol).`,
    );
  }
  return json;
}

/** Thrown inside the JSON walk for a value JSON cannot keep; reported as PAYLOAD_NOT_ENCODABLE. */
class LossyValue extends Error {
  constructor(
    what: string,
    readonly becomes: string,
  ) {
    super(what);
  }
}

/**
 * JSON.stringify's replacer that refuses what would be silently lost: NaN and ±Infinity (written
 * as null), and objects other than plain objects and arrays that encode to `{}` (a Map, a Set, an
 * Error, a Promise, a class whose data sits in getters). Runs after `toJSON`, so a Date passes.
 */
function refuseLossy(this: unknown, key: string, value: unknown): unknown {
  const at = key === '' ? 'the top level' : `key ${JSON.stringify(key)}`;
  const number = value instanceof Number ? value.valueOf() : value;
  if (typeof number === 'number' && !Number.isFinite(number)) {
    throw new LossyValue(`${String(number)} at ${at}`, 'null');
  }
  if (value instanceof Number || value instanceof String || value instanceof Boolean) return value;
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const prototype = Object.getPrototypeOf(value) as unknown;
    if (prototype !== Object.prototype && prototype !== null && Object.keys(value).length === 0) {
      throw new LossyValue(`${describeObject(value)} at ${at}`, '{}');
    }
  }
  return value;
}

function describeObject(value: object): string {
  const name = (value.constructor as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && name !== '' ? `a ${name}` : 'an object without fields';
}

/** Names every relay sets itself (`outboxer-id`, …): a message may not carry any of the prefix. */
export const RESERVED_HEADER_PREFIX = 'outboxer-';
// AMQP's limit for a header name (a short string), the strictest of the brokers.
const MAX_HEADER_NAME_BYTES = 255;
// Control characters, whitespace and ':' break HTTP, NATS and AMQP framing of a header name.
const BAD_HEADER_NAME = /[\x00-\x20\x7f:]/;
// CR, LF and NUL end a header line early (HTTP, NATS): a relay could never send such a value.
const BAD_HEADER_VALUE = /[\r\n\0]/;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

/** Why `headers` is not a plain object, in words a caller can act on. */
function notPlainHeaders(what: string, headers: unknown): string {
  const kind = Array.isArray(headers)
    ? 'an array'
    : typeof headers === 'object' && headers !== null
      ? describeObject(headers)
      : `a ${typeof headers}`;
  return `${what} must be a plain object of string values; got ${kind}${kind.startsWith('a Map') || kind.startsWith('a Headers') ? ' (convert it with Object.fromEntries(...))' : ''}.`;
}

/** The message's own headers over the instance's `publishHeaders`, both checked, as JSON text. */
function encodeHeaders(
  outbox: string,
  own: unknown,
  shared: unknown,
  capabilities: DialectCapabilities,
): string | null {
  // Without a prototype, an own "__proto__" header is a header like any other, not a setter.
  const merged: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [what, headers] of [
    ['publishHeaders()', shared],
    ['headers', own],
  ] as const) {
    if (headers === undefined || headers === null) continue;
    if (!isPlainObject(headers)) throw invalid(outbox, notPlainHeaders(what, headers));
    for (const [name, value] of Object.entries(headers)) merged[name] = value;
  }
  const entries = Object.entries(merged);
  if (entries.length === 0) return null;
  for (const [name, value] of entries) checkHeader(outbox, name, value, capabilities);
  const json = JSON.stringify(merged);
  if (Buffer.byteLength(json, 'utf8') > MAX_HEADER_BYTES) {
    throw invalid(outbox, `headers are larger than ${MAX_HEADER_BYTES} bytes encoded.`);
  }
  return json;
}

function checkHeader(outbox: string, name: string, value: unknown, capabilities: DialectCapabilities): void {
  const shown = JSON.stringify(name);
  if (typeof value !== 'string')
    throw invalid(outbox, `header ${shown} must be a string; got ${typeof value}.`);
  if (
    name.length === 0 ||
    Buffer.byteLength(name, 'utf8') > MAX_HEADER_NAME_BYTES ||
    BAD_HEADER_NAME.test(name)
  ) {
    throw invalid(
      outbox,
      `header name ${shown} must be 1 to ${MAX_HEADER_NAME_BYTES} bytes (UTF-8) without spaces, control characters or ':'.`,
    );
  }
  if (name.toLowerCase().startsWith(RESERVED_HEADER_PREFIX)) {
    throw invalid(
      outbox,
      `header ${shown} is reserved: names starting with "${RESERVED_HEADER_PREFIX}" (any case) are set by outboxer itself (outboxer-id is the consumers' deduplication key). Use another name.`,
    );
  }
  if (BAD_HEADER_VALUE.test(value)) {
    throw invalid(outbox, `header ${shown} contains a CR, LF or NUL character, which no relay can send.`);
  }
  checkText(outbox, `header name ${shown}`, name, capabilities);
  checkText(outbox, `header ${shown}`, value, capabilities);
}
