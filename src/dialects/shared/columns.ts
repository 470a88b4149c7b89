import type { PolledEnvelope, Row } from '../../core/database.js';

/**
 * Reading rows back, the same for every dialect: Postgres returns timestamps as `Date` and
 * booleans as `true`, SQLite as Unix milliseconds and `1`; JSON columns come back as text.
 */

export function parseJsonColumn(value: unknown): unknown {
  return typeof value === 'string' ? JSON.parse(value) : value;
}

export function parseHeaders(value: unknown): Record<string, string> {
  if (value === null || value === undefined) return {};
  return parseJsonColumn(value) as Record<string, string>;
}

export function readDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  return value instanceof Date ? value : new Date(Number(value));
}

/** A row of a poll or a listing (the dialects select the same columns) as an envelope. */
export function readEnvelope(row: Row, outbox: string): PolledEnvelope {
  return {
    id: Number(row.id),
    outbox,
    type: (row.type as string | null) ?? null,
    groupKey: (row.group_key as string | null) ?? null,
    partition: Number(row.partition),
    payload: parseJsonColumn(row.payload),
    headers: parseHeaders(row.headers),
    attempts: Number(row.attempts),
    lastError: (row.last_error as string | null) ?? null,
    nextAttemptAt: readDate(row.next_attempt_at),
    failingSince: readDate(row.failing_since),
    insertedAt: readDate(row.inserted_at)!,
    status: Number(row.status),
    blocked: row.blocked === true || row.blocked === 1,
  };
}
