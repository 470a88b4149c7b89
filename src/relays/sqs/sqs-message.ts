/**
 * Turns an envelope into a SendMessageBatch entry, and refuses before sending what SQS would
 * reject: characters outside XML's set, too many bytes, attributes SQS does not take.
 */
import { createHash } from 'node:crypto';
import { PermanentError } from '../../core/errors.js';
import type { DeliveryContext, Envelope } from '../../core/relay.js';
import type { Ordering } from '../../core/options.js';
import { OUTBOXER_HEADERS, standardHeaders } from '../shared/headers.js';
import type { SqsBatchEntry, SqsStringAttribute } from './sqs-client.js';
import type { ResolvedSqsOptions } from './sqs-options.js';

/**
 * SQS quotas the relay plans with (AWS raised messages and batches from 256 KiB to 1 MiB in 2025).
 *
 * @example
 * SQS_LIMITS.messageBytes // 1048576
 */
export const SQS_LIMITS = Object.freeze({
  /** Entries in one SendMessageBatch call. */
  entriesPerCall: 10,
  /** Bytes of one message: body plus every attribute's name, type and value. */
  messageBytes: 1_048_576,
  /** Bytes of all messages of one SendMessageBatch call. */
  callBytes: 1_048_576,
  /** Message attributes per message. */
  attributes: 10,
});

/**
 * Attribute that carries the message's own headers as JSON when they cannot be attributes one by
 * one (more than 10 attributes in all, a name SQS refuses, an empty value).
 *
 * @example
 * const own = attributes[PACKED_HEADERS_ATTRIBUTE] ? JSON.parse(attributes[PACKED_HEADERS_ATTRIBUTE].StringValue) : attributes;
 */
export const PACKED_HEADERS_ATTRIBUTE = 'outboxer-headers';

/** A message ready to send: its entry and its size as SQS counts it. */
export interface PreparedEntry {
  readonly entry: SqsBatchEntry;
  readonly bytes: number;
}

// XML 1.0 Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]. With the
// `u` flag a lone surrogate is one code point outside the set, so it is caught too.
const NOT_XML_CHAR = /[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;
const SQS_ID = /^[\x21-\x7E]{1,128}$/;
const ATTRIBUTE_NAME = /^(?!\.)(?!.*\.\.)(?!.*\.$)(?!aws\.|amazon\.)[A-Za-z0-9_.-]{1,256}$/i;
const STANDARD_NAMES: ReadonlySet<string> = new Set(Object.values(OUTBOXER_HEADERS));

/**
 * MessageGroupId by default: the outbox name under `'total'` ordering (one order for the whole
 * outbox needs one SQS group), otherwise the group key, and for a message without group key its
 * own id, so that unordered messages neither wait for nor hold up anything at the consumer.
 *
 * @example
 * defaultMessageGroupId({ id: 7, groupKey: 'order:42', ... }, 'group') // 'order:42'
 * defaultMessageGroupId({ id: 8, groupKey: null, ... }, 'group')       // '8'
 */
export function defaultMessageGroupId(envelope: Envelope, ordering: Ordering): string {
  if (ordering === 'total') return envelope.outbox;
  return envelope.groupKey ?? String(envelope.id);
}

/**
 * A MessageGroupId or MessageDeduplicationId as SQS accepts it: the value itself when it is 1–128
 * printable ASCII characters, else `sha256:` and a hash of it. The hash is deterministic, so a
 * group stays one group and a redelivery keeps its deduplication id.
 *
 * @example
 * toSqsId('order:42')      // 'order:42'
 * toSqsId('commande é 42') // 'sha256:…' (43 base64url characters)
 */
export function toSqsId(value: string): string {
  if (SQS_ID.test(value)) return value;
  return `sha256:${createHash('sha256').update(value, 'utf8').digest('base64url')}`;
}

/** The entry for one message, or the PermanentError that says why SQS would never take it. */
export function prepareEntry(
  envelope: Envelope,
  options: ResolvedSqsOptions,
  context: DeliveryContext,
  maxMessageBytes: number,
): PreparedEntry | PermanentError {
  const body = callHook('body', () => options.body(envelope));
  if (body instanceof PermanentError) return body;
  if (body.length === 0)
    return new PermanentError(`Message ${envelope.id} has an empty body, which SQS does not accept.`);
  const attributes = messageAttributes(envelope);
  const invalid = invalidCharacters(envelope, body, attributes);
  if (invalid !== undefined) return invalid;
  const bytes = messageBytes(body, attributes);
  if (bytes > maxMessageBytes) {
    return new PermanentError(
      `Message ${envelope.id} is ${bytes} bytes for SQS (body and attributes), over the queue's limit of ${maxMessageBytes}. Publish a reference to data stored elsewhere (S3) instead; discard this message to let its group move on.`,
    );
  }
  const entry: SqsBatchEntry = { Id: String(envelope.id), MessageBody: body, MessageAttributes: attributes };
  const groupHook = options.messageGroupId;
  if (options.fifo || groupHook !== undefined) {
    const group = callHook('messageGroupId', () =>
      groupHook ? groupHook(envelope, context) : defaultMessageGroupId(envelope, context.ordering),
    );
    if (group instanceof PermanentError) return group;
    entry.MessageGroupId = toSqsId(group);
  }
  if (options.fifo) {
    const dedupeHook = options.deduplicationId;
    const dedupe = callHook('deduplicationId', () =>
      dedupeHook ? dedupeHook(envelope) : String(envelope.id),
    );
    if (dedupe instanceof PermanentError) return dedupe;
    entry.MessageDeduplicationId = toSqsId(dedupe);
  }
  return { entry, bytes };
}

/**
 * The standard headers (outboxer-id, outboxer-outbox, outboxer-type, outboxer-group-key) as
 * String attributes, plus the message's own headers: one attribute each when they all fit in
 * SQS's 10 and are valid attribute names with non-empty values; otherwise all of them together
 * as JSON in the one attribute `outboxer-headers`, so no header is lost and the shape is
 * predictable.
 */
export function messageAttributes(envelope: Envelope): Record<string, SqsStringAttribute> {
  const all = standardHeaders(envelope);
  const standard = Object.entries(all).filter(([name]) => STANDARD_NAMES.has(name));
  const own = Object.entries(all).filter(([name]) => !STANDARD_NAMES.has(name));
  const separate =
    standard.length + own.length <= SQS_LIMITS.attributes &&
    own.every(([name, value]) => ATTRIBUTE_NAME.test(name) && value.length > 0);
  const entries =
    separate || own.length === 0
      ? [...standard, ...own]
      : [...standard, [PACKED_HEADERS_ATTRIBUTE, JSON.stringify(Object.fromEntries(own))]];
  return Object.fromEntries(
    entries.map(([name, value]) => [name, { DataType: 'String', StringValue: value! }]),
  );
}

/** Size as SQS counts it: the body and each attribute's name, data type and value, in UTF-8. */
export function messageBytes(body: string, attributes: Record<string, SqsStringAttribute>): number {
  let bytes = Buffer.byteLength(body, 'utf8');
  for (const [name, attribute] of Object.entries(attributes)) {
    bytes +=
      Buffer.byteLength(name, 'utf8') +
      Buffer.byteLength(attribute.DataType, 'utf8') +
      Buffer.byteLength(attribute.StringValue, 'utf8');
  }
  return bytes;
}

/** Where the first character SQS does not accept is, or `undefined`. */
export function findInvalidCharacter(text: string): { index: number; codePoint: string } | undefined {
  const match = NOT_XML_CHAR.exec(text);
  if (match === null) return undefined;
  return {
    index: match.index,
    codePoint: `U+${match[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`,
  };
}

function invalidCharacters(
  envelope: Envelope,
  body: string,
  attributes: Record<string, SqsStringAttribute>,
): PermanentError | undefined {
  const places: Array<[string, string]> = [
    ['the body', body],
    ...Object.entries(attributes).map(([name, a]): [string, string] => [
      `attribute "${name}"`,
      a.StringValue,
    ]),
  ];
  for (const [where, text] of places) {
    const found = findInvalidCharacter(text);
    if (found === undefined) continue;
    return new PermanentError(
      `Message ${envelope.id} cannot go to SQS: ${where} contains ${found.codePoint} at index ${found.index}, outside the characters SQS accepts (#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF). Encode such data (base64) before publishing; discard this message to let its group move on.`,
    );
  }
  return undefined;
}

// A hook that throws (or returns no string) fails only its own message, for good: the same
// message would fail the same way next time.
function callHook(hook: string, call: () => unknown): string | PermanentError {
  try {
    const value = call();
    if (typeof value === 'string') return value;
    return new PermanentError(`sqsRelay option ${hook}() returned ${typeof value}, not a string.`);
  } catch (error) {
    return new PermanentError(
      `sqsRelay option ${hook}() threw: ${(error as Error)?.message ?? String(error)}`,
      { cause: error },
    );
  }
}
