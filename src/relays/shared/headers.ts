import { RESERVED_HEADER_PREFIX } from '../../core/encoding.js';
import type { Envelope } from '../../core/relay.js';

/** Header names every relay sets, so consumers can deduplicate and route whatever the broker. */
export const OUTBOXER_HEADERS = {
  id: 'outboxer-id',
  type: 'outboxer-type',
  outbox: 'outboxer-outbox',
  groupKey: 'outboxer-group-key',
} as const;

/**
 * The message's own headers plus outboxer's: its id (the deduplication key: a consumer that keeps
 * the last id per group can drop redeliveries), outbox, type and group key when set.
 */
export function standardHeaders(envelope: Envelope): Record<string, string> {
  const headers: Record<string, string> = {
    ...ownHeaders(envelope),
    [OUTBOXER_HEADERS.id]: String(envelope.id),
    [OUTBOXER_HEADERS.outbox]: envelope.outbox,
  };
  if (envelope.type !== null) headers[OUTBOXER_HEADERS.type] = envelope.type;
  if (envelope.groupKey !== null) headers[OUTBOXER_HEADERS.groupKey] = envelope.groupKey;
  return headers;
}

/**
 * The message's own headers without any in outboxer's namespace, whatever their case. `publish`
 * refuses such names; a row written another way (by hand, or before that check) must still not
 * pose as outboxer's id to a consumer that deduplicates on it.
 */
export function ownHeaders(envelope: Envelope): Record<string, string> {
  const own = envelope.headers;
  const names = Object.keys(own);
  if (!names.some((name) => name.toLowerCase().startsWith(RESERVED_HEADER_PREFIX))) return own;
  return Object.fromEntries(
    names.filter((name) => !name.toLowerCase().startsWith(RESERVED_HEADER_PREFIX)).map((n) => [n, own[n]!]),
  );
}
