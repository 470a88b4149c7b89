import type { DialectCapabilities, InsertRow } from './database.js';
import { OutboxerError } from './errors.js';
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
  const headers = encodeHeaders(outbox.name, options.headers, capabilities);
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

function checkGroupKey(outbox: string, key: unknown, capabilities: DialectCapabilities): string | null {
  if (key === null || key === undefined) return null;
  if (typeof key !== 'string') {
    throw invalid(outbox, `groupKey must be a string, null or undefined; got ${typeof key}.`);
  }
  if (key.length === 0)
    throw invalid(outbox, 'groupKey must not be empty; use null for an unordered message.');
  checkText(outbox, 'groupKey', key, capabilities);
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
  return type;
}

function encodeJson(outbox: string, value: unknown, what: string): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new OutboxerError(
      'PAYLOAD_NOT_ENCODABLE',
      `The ${what} for outbox "${outbox}" cannot be encoded as JSON (${error instanceof Error ? error.message : String(error)}). BigInt values and circular references are the usual cause: convert them first.`,
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

function encodeHeaders(outbox: string, headers: unknown, capabilities: DialectCapabilities): string | null {
  if (headers === undefined || headers === null) return null;
  if (typeof headers !== 'object' || Array.isArray(headers)) {
    throw invalid(outbox, 'headers must be an object of string values.');
  }
  const entries = Object.entries(headers);
  if (entries.length === 0) return null;
  for (const [key, value] of entries) {
    if (typeof value !== 'string')
      throw invalid(outbox, `header "${key}" must be a string; got ${typeof value}.`);
    checkText(outbox, `header name "${key}"`, key, capabilities);
    checkText(outbox, `header "${key}"`, value, capabilities);
  }
  const json = JSON.stringify(headers);
  if (Buffer.byteLength(json, 'utf8') > MAX_HEADER_BYTES) {
    throw invalid(outbox, `headers are larger than ${MAX_HEADER_BYTES} bytes encoded.`);
  }
  return json;
}
