/**
 * What `inbox.store(tx, message)` takes and writes: the message's identity, deduplicated like
 * `handle`'s, and the message itself, published into the inbox's backing outbox in the same
 * transaction (process.ts processes it from there).
 */
import { OutboxerError, showValue } from '../errors.js';
import type { PublishInput } from '../api.js';
import type { Headers } from '../relay.js';
import type { InboxMessage, InboxOutcome } from './inbox.js';
import type { StoredBody } from './process.js';

/** A received message to store: its identity (as for `handle`) and what the handler will get. */
export interface StoreMessage extends InboxMessage {
  /**
   * The message's body, stored as JSON. The stored row's payload is `{ id, source, payload,
   * headers }`, within the `process` option's `maxPayloadBytes`.
   */
  payload: unknown;
  /** Headers kept with it (outboxer's own from a producer included), handed to the handler. */
  headers?: Headers | undefined;
  /** A type name kept with it. */
  type?: string | null | undefined;
}

/**
 * What `store` did: stored the message (`value` is its id in the backing outbox, `inbox:<name>`),
 * with `outOfOrder` as `handle` reports it when a `sequence` was given; or found it stored before
 * (`duplicate: true`), and wrote nothing.
 */
export type StoreOutcome = InboxOutcome<number>;

/** The publish a store makes, or the typed error of a message that cannot be one. */
export function storedInput(inbox: string, outbox: string, message: StoreMessage): PublishInput {
  if (typeof message !== 'object' || message === null)
    throw invalid(
      inbox,
      `the message must be an object such as { id, source, payload }; got ${showValue(message)}.`,
    );
  if (!('payload' in message) || message.payload === undefined)
    throw invalid(inbox, 'store() needs a payload (null for an empty one).');
  const { headers } = message;
  if (
    headers !== undefined &&
    (typeof headers !== 'object' ||
      headers === null ||
      Array.isArray(headers) ||
      Object.values(headers).some((value) => typeof value !== 'string'))
  )
    throw invalid(inbox, `headers must be an object of strings; got ${showValue(headers)}.`);
  const body: StoredBody = {
    id: String(message.id),
    source: message.source ?? '',
    payload: message.payload,
    ...(headers === undefined ? {} : { headers }),
  };
  return { outbox, payload: body, groupKey: message.groupKey ?? null, type: message.type ?? null };
}

function invalid(inbox: string, detail: string): OutboxerError {
  return new OutboxerError('INVALID_MESSAGE', `Inbox "${inbox}": ${detail}`);
}
