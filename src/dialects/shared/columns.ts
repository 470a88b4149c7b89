import type {
  BlockedCounts,
  BlockedHead,
  CountFigures,
  NextRetry,
  PolledEnvelope,
  PolledMessage,
  RecordedConfiguration,
} from '../../core/dialect.js';
import { RowEnvelope, type Writable } from '../../core/payload.js';
import type { Ordering } from '../../core/relay.js';
import type { Row, Statement, StatusValue } from '../../core/sql.js';
import type { Parameters } from './parameters.js';

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

/**
 * A next retry as the database returned it (a timestamp, or Unix milliseconds as a number or its
 * text, depending on the statement and the driver); the local clock when the database's is missing.
 */
export function nextRetryOf(at: unknown, now: unknown): NextRetry {
  return { at: at === null || at === undefined ? null : millisecondsOf(at), now: millisecondsOf(now) };
}

function millisecondsOf(value: unknown): number {
  if (value instanceof Date) return value.getTime();
  const number = Number(value);
  if (Number.isFinite(number)) return number;
  const parsed = typeof value === 'string' ? Date.parse(value) : NaN;
  return Number.isNaN(parsed) ? Date.now() : parsed;
}

export function readDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  return value instanceof Date ? value : new Date(Number(value));
}

/**
 * A row of a poll or a listing (the dialects select the same columns) as an envelope, whose
 * payload is parsed on its first read when the driver returned the stored text (core/payload.ts).
 */
export function readEnvelope(row: Row, outbox: string): PolledEnvelope {
  return new PolledRowEnvelope(row, outbox);
}

class PolledRowEnvelope extends RowEnvelope implements PolledEnvelope {
  declare readonly status: StatusValue;
  declare readonly blocked: boolean;

  constructor(row: Row, outbox: string) {
    super();
    const fields = this as Writable<Omit<PolledEnvelope, 'payload'>>;
    fields.id = Number(row.id);
    fields.outbox = outbox;
    fields.type = (row.type as string | null) ?? null;
    fields.groupKey = (row.group_key as string | null) ?? null;
    fields.partition = Number(row.partition);
    this.storePayload(row.payload);
    fields.headers = parseHeaders(row.headers);
    fields.attempts = Number(row.attempts);
    fields.lastError = (row.last_error as string | null) ?? null;
    fields.nextAttemptAt = readDate(row.next_attempt_at);
    fields.failingSince = readDate(row.failing_since);
    fields.insertedAt = readDate(row.inserted_at)!;
    fields.status = Number(row.status) as StatusValue;
    fields.blocked = row.blocked === true || row.blocked === 1;
  }
}

/** A polled row, read as far as choosing a batch needs; the payload waits for {@link envelope}. */
class PolledRow implements PolledMessage {
  readonly id: number;
  readonly status: StatusValue;
  readonly blocked: boolean;
  readonly groupKey: string | null;

  constructor(
    private readonly row: Row,
    private readonly outbox: string,
  ) {
    this.id = Number(row.id);
    this.status = Number(row.status) as StatusValue;
    this.blocked = row.blocked === true || row.blocked === 1;
    this.groupKey = (row.group_key as string | null) ?? null;
  }

  envelope(): PolledEnvelope {
    return readEnvelope(this.row, this.outbox);
  }
}

/**
 * The message rows of a poll (not a row of nulls that only reports where it started), in id order:
 * retries due and ready rows come from two index scans, unsorted.
 */
export function polledMessages(rows: readonly Row[], outbox: string): PolledMessage[] {
  const messages: PolledMessage[] = [];
  for (const row of rows) {
    if (row.id !== null && row.id !== undefined) messages.push(new PolledRow(row, outbox));
  }
  return messages.sort((a, b) => a.id - b.id);
}

/**
 * The counts statement's row (`pending`, `delivered`, `dead`, `orphaned`, `relay_seen_at`,
 * `oldest_pending_at`: the aliases both dialects select), zeros when there is none.
 */
export function readCountFigures(rows: readonly Row[]): CountFigures {
  const row = rows[0];
  return {
    pending: Number(row?.pending ?? 0),
    delivered: Number(row?.delivered ?? 0),
    dead: Number(row?.dead ?? 0),
    orphaned: Number(row?.orphaned ?? 0),
    relaySeenAt: readDate(row?.relay_seen_at),
    oldestPendingAt: readDate(row?.oldest_pending_at),
  };
}

/** A row of `<table>_config` (`partitions`, `ordering`, `serialize_writes`, `on_dead`), or none. */
export function readConfigurationRow(rows: readonly Row[]): RecordedConfiguration | undefined {
  const row = rows[0];
  if (row === undefined) return undefined;
  return {
    partitions: Number(row.partitions),
    ordering: String(row.ordering) as Ordering,
    serializeWrites: row.serialize_writes === true || row.serialize_writes === 1,
    onDead: row.on_dead === 'park' ? 'park' : 'continue',
  };
}

/** Rows of the blocked-groups statement: each head and how many wait behind it (`waiting`). */
/** The row of `blockedCounts` (`retrying`, `parked`), each counted up to `upTo` if given. */
export function readBlockedCounts(rows: readonly Row[], upTo?: number): BlockedCounts {
  const row = rows[0];
  const retrying = Number(row?.retrying ?? 0);
  const parked = Number(row?.parked ?? 0);
  return { retrying, parked, exact: upTo === undefined || (retrying < upTo && parked < upTo) };
}

export function readBlockedHeads(rows: readonly Row[], outbox: string): BlockedHead[] {
  return rows.map((row) => ({ head: readEnvelope(row, outbox), waiting: Number(row.waiting) }));
}

/** The recorded configuration of an outbox: the same statement on both dialects but for `p`'s placeholders. */
export function configurationOf(
  p: Parameters,
  configTable: string,
  outbox: string,
): Statement<RecordedConfiguration | undefined> {
  return p.statement(
    `SELECT partitions, ordering, serialize_writes, on_dead FROM ${configTable} WHERE outbox = ${p.add(outbox)}`,
    readConfigurationRow,
  );
}
