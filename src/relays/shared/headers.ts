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
    ...envelope.headers,
    [OUTBOXER_HEADERS.id]: String(envelope.id),
    [OUTBOXER_HEADERS.outbox]: envelope.outbox,
  };
  if (envelope.type !== null) headers[OUTBOXER_HEADERS.type] = envelope.type;
  if (envelope.groupKey !== null) headers[OUTBOXER_HEADERS.groupKey] = envelope.groupKey;
  return headers;
}
