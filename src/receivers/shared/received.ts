/**
 * What the broker receivers share: outboxer's headers read off a delivery (as text, whatever the
 * client gives: Buffers, strings, arrays), the identity the inbox records, the body parsed, and an
 * ordered queue per partition (or queue) that never acknowledges past a message that failed.
 */
import type { ReceivedIdentity, ReceivedMessage } from '../../core/inbox/receiver.js';
import { OUTBOXER_HEADERS } from '../../relays/shared/headers.js';

/** A header value or a body as a client gives it, as text; undefined for none. */
export function textOf(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array)
    return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8');
  if (Array.isArray(value)) return textOf(value[0]); // a repeated header: outboxer's are never repeated
  return String(value);
}

/** Headers as text, from a Map (@platformatic/kafka) or a record (kafkajs, AMQP, SQS attributes…). */
export function headersOf(headers: unknown): Record<string, string> {
  const result: Record<string, string> = {};
  if (headers === undefined || headers === null) return result;
  const entries =
    headers instanceof Map ? [...headers.entries()] : Object.entries(headers as Record<string, unknown>);
  for (const [name, value] of entries) {
    const key = textOf(name);
    const text = textOf(value);
    if (key !== undefined && text !== undefined) result[key] = text;
  }
  return result;
}

/**
 * The identity of a delivery: `outboxer-id`; the source (the `source` option, else the
 * `outboxer-outbox` header, else the destination's name: outbox ids are unique per outbox, and a
 * message without the header is another producer's, unique where it was sent); the group key.
 */
export function identityOf(
  headers: Readonly<Record<string, string>>,
  destination: string,
  source: string | undefined,
): ReceivedIdentity {
  return {
    id: nonEmpty(headers[OUTBOXER_HEADERS.id]),
    source: source ?? nonEmpty(headers[OUTBOXER_HEADERS.outbox]) ?? destination,
    groupKey: nonEmpty(headers[OUTBOXER_HEADERS.groupKey]) ?? null,
  };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

/**
 * The body parsed: the relays send the payload as JSON. A value a client already deserialized
 * (an object) is passed on; a body that is not JSON gives undefined (the handler reads `raw`).
 */
export function payloadOf(body: unknown): unknown {
  if (body !== null && typeof body === 'object' && !(body instanceof Uint8Array)) return body;
  const text = textOf(body);
  if (text === undefined || text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The message a broker receiver's handler gets. */
export function receivedMessage<Raw>(
  raw: Raw,
  id: string,
  identity: ReceivedIdentity,
  headers: Readonly<Record<string, string>>,
  body: unknown,
): ReceivedMessage<Raw> {
  return {
    id,
    source: identity.source,
    groupKey: identity.groupKey,
    type: nonEmpty(headers[OUTBOXER_HEADERS.type]) ?? null,
    headers,
    payload: payloadOf(body),
    raw,
  };
}
