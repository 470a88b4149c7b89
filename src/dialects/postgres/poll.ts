import type { PollParams, PollResult, PollStart } from '../../core/dialect.js';
import type { QualifiedName } from '../../core/identifiers.js';
import { Status, type Row, type Statement } from '../../core/sql.js';
import { nextRetryOf, polledMessages } from '../shared/columns.js';
import { Parameters } from '../shared/parameters.js';
import { blockingStatus } from '../shared/statuses.js';
import { notifyLock } from './publish.js';
import { COLUMNS, opaque } from './shared.js';
import { tables } from './tables.js';

/**
 * Polling: the rows a worker delivers next, and where its cursor starts.
 *
 * Locking: none on rows. A poll reads on its statement's snapshot, which also decides where it
 * starts (the late-commit watch of {@link startCtes}) and reads the partition's rewind count, so
 * that a rewind and the rows it made ready are seen together. With `checkPublishers` it tries the
 * `publishing` advisory lock of its notify payload once the snapshot is taken, as its own until
 * the statement ends: a publisher that tries the lock meanwhile notifies. Writes that follow a
 * poll (hold, settle) are fenced on the lease; the poll need not be.
 */

/** The poll's `dueBefore` as a parameter value. */
export function dueParam(params: PollParams): string | Date | null {
  return params.dueBefore === 'infinity' ? 'infinity' : params.dueBefore;
}

/** The watched transactions and the cursors to go back to, as parameter values. */
export function watchValues(params: PollParams): [string[], number[]] {
  return [[...(params.watch?.xids ?? [])], [...(params.watch?.rewindTo ?? [])]];
}

/** The `exclude` ids and the largest of them, as parameter values. */
export function excludeValues(params: PollParams): [number[], number] {
  const ids = [...(params.exclude ?? [])];
  return [ids, Math.max(0, ...ids)];
}

/** Placeholders of the poll's inputs, so the poll can be embedded in another statement. */
export interface PollPlaceholders {
  readonly outbox: string;
  readonly partition: string;
  readonly limit: string;
  readonly afterId: string;
  readonly due: string;
  /** Ids to leave out (see `PollParams.exclude`), all at or below `above`. */
  readonly exclude?: { readonly ids: string; readonly above: string } | undefined;
}

/** Placeholders of what decides where a poll starts (see `startCtes`). */
export interface StartPlaceholders {
  readonly outbox: string;
  readonly partition: string;
  readonly afterId: string;
  readonly xids: string;
  readonly rewindTo: string;
  readonly rewindsSeen: string;
  /** The notify payload to test (`PollParams.checkPublishers`) and the quoted message table. */
  readonly publishers?: { readonly payload: string; readonly messages: string } | undefined;
}

/**
 * The transaction ids from the snapshot's `xmax` up to the newest one assigned by now, as a set of
 * `xid8`. A snapshot lists the transactions in flight below its `xmax` (one more than the newest
 * *completed* id) only: one that took a newer id before the snapshot is invisible to it without
 * being listed, yet may have drawn message ids below the committed ones the poll returns. `age()`
 * measures from the next id to be assigned (or this transaction's own, once it has one), fixed
 * for the transaction at its first call, which comes after the snapshot. Usually a handful of ids;
 * capped at 10,000.
 */
function aboveXmax(snapshot: string): string {
  const xmax = `pg_snapshot_xmax(${snapshot})::text::bigint`;
  // 0, 1 and 2 are never assigned (the counter skips them as it wraps): `age()` of one is 2^31 - 1.
  const count = `CASE WHEN ${xmax} % 4294967296 < 3 THEN 0 ELSE LEAST(10000, age((${xmax} % 4294967296)::text::xid)) END`;
  return `(SELECT (${xmax} + g)::text::xid8 AS x FROM generate_series(0, ${count} - 1) AS g)`;
}

/**
 * The writing transactions in flight on the snapshot in column `s` of `snapshots` (a relation of
 * one row), as an array of `xid8` text, this statement's own left out: those it lists, and those
 * above its `xmax` that have not aborted (a newer one that committed since is invisible to it too).
 */
export function inFlight(snapshots: string): string {
  return `(SELECT coalesce(array_agg(x::text), '{}') FROM ${snapshots} AS snap, LATERAL (
       SELECT pg_snapshot_xip(snap.s) AS x
       UNION ALL
       SELECT x FROM ${aboveXmax('snap.s')} AS above WHERE pg_xact_status(x) IS DISTINCT FROM 'aborted'
     ) AS writing WHERE x IS DISTINCT FROM pg_current_xact_id_if_assigned())`;
}

/**
 * Where the poll starts, decided on its own snapshot (see `PollParams.watch`): the cursor, or the
 * lowest `rewindTo` of a watched transaction that has ended since, which may have committed
 * messages below the cursor, or the beginning when the partition's lease row counts a rewind the
 * worker has not seen (see `PollParams.rewindsSeen`). Also the writing transactions the snapshot
 * sees in flight (the statement's own excluded), which the engine watches if it moves the cursor
 * on, and the rewinds counted.
 */
export function startCtes(leases: string, $: StartPlaceholders): string {
  // Tested once the snapshot is taken. The lock is this statement's own: a publisher that tries
  // `publishing` meanwhile notifies.
  const quiet =
    $.publishers === undefined
      ? ''
      : `pg_try_advisory_xact_lock(${notifyLock('publishing', `${$.publishers.payload}::text`, $.publishers.messages)}) AS publishers_quiet,
    `;
  // Read on the statement's snapshot, with the messages: a rewind and the rows it made ready
  // commit together, so a poll that sees the rows sees the count. (Not the lease CTE's RETURNING,
  // which may see a count committed after the snapshot.)
  return `snap AS MATERIALIZED (SELECT pg_current_snapshot() AS s),
start AS MATERIALIZED (
  SELECT ${quiet}CASE WHEN counted.rewinds IS DISTINCT FROM ${$.rewindsSeen}::bigint THEN 0 ELSE LEAST(${$.afterId}::bigint, COALESCE((
      SELECT min(w.r) FROM unnest(${$.xids}::xid8[], ${$.rewindTo}::bigint[]) AS w(x, r), snap
      WHERE pg_visible_in_snapshot(w.x, snap.s)), ${$.afterId}::bigint)) END AS after_id,
    ${inFlight('snap')} AS in_flight,
    counted.rewinds
  FROM (SELECT (SELECT rewinds FROM ${leases} WHERE outbox = ${$.outbox} AND partition = ${$.partition}) AS rewinds) AS counted
)`;
}

/**
 * Where the poll started, what it saw in flight and the rewinds counted, on its first row only
 * (the reader reads them there): the rows after it carry nulls, which cost the driver nothing to
 * parse. The rows come unsorted (the reader orders them by id): without a sort, Postgres streams
 * them out as it reads them, and the client parses the first while the server reads the last
 * (a poll of a hundred rows comes back about a tenth sooner, and costs the server less).
 */
export const startColumns = `CASE WHEN row_number() OVER () = 1 THEN start.after_id END AS after_id,
  CASE WHEN row_number() OVER () = 1 THEN start.in_flight END AS in_flight,
  CASE WHEN row_number() OVER () = 1 THEN start.rewinds END AS rewinds`;

/**
 * On the row of nulls of a poll that found nothing: the partition's earliest retry and the
 * database's clock, which an idle worker needs to know how long to sleep. `polled` is the alias of
 * the poll's rows. The subquery is an InitPlan, run only when the poll came back empty: a draining
 * poll does not pay for it.
 */
function nextRetryColumns(messages: string, polled: string, outbox: string, partition: string): string {
  const empty = `${polled}.id IS NULL`;
  return `CASE WHEN ${empty} THEN (SELECT date_part('epoch', min(next_attempt_at)) * 1000 FROM ${messages} WHERE outbox = ${outbox} AND partition = ${partition} AND status = ${Status.retry}) END AS next_retry_at,
  CASE WHEN ${empty} THEN date_part('epoch', now()) * 1000 END AS database_now`;
}

/** The rows of a poll (one of nulls but the start columns when it found nothing) as its result. */
export function readPoll(rows: readonly Row[], outbox: string): PollResult {
  const messages = polledMessages(rows, outbox);
  const first = rows[0];
  return {
    messages,
    start: readStart(first),
    publishersQuiet: first?.publishers_quiet === true,
    nextRetry:
      messages.length === 0 && first?.database_now !== undefined && first.database_now !== null
        ? nextRetryOf(first.next_retry_at, first.database_now)
        : undefined,
  };
}

function readStart(first: Row | undefined): PollStart | undefined {
  if (first === undefined || first.after_id === undefined || first.after_id === null) return undefined;
  return {
    afterId: Number(first.after_id),
    inFlight: (first.in_flight as string[] | null) ?? [],
    rewinds: first.rewinds === undefined || first.rewinds === null ? undefined : Number(first.rewinds),
  };
}

export function poll(table: QualifiedName, params: PollParams): Statement<PollResult> {
  const { messages, leases } = tables(table);
  const { lease } = params;
  const p = Parameters.numbered();
  const outbox = p.add(lease.outbox);
  const partition = p.add(lease.partition);
  const limit = p.add(params.limit);
  const afterId = p.add(params.afterId);
  const due = p.add(dueParam(params));
  const [watched, rewindToValues] = watchValues(params);
  const xids = p.add(watched);
  const rewindTo = p.add(rewindToValues);
  const [excluded, excludedAbove] = excludeValues(params);
  const exclude = excluded.length > 0 ? { ids: p.add(excluded), above: p.add(excludedAbove) } : undefined;
  const rewindsSeen = p.add(params.rewindsSeen ?? null);
  const publishers =
    params.checkPublishers === undefined ? undefined : { payload: p.add(params.checkPublishers), messages };
  const polled = pollText(messages, params, {
    outbox,
    partition,
    limit,
    afterId: '(SELECT after_id FROM start)',
    due,
    exclude,
  });
  const start = startCtes(leases, { outbox, partition, afterId, xids, rewindTo, rewindsSeen, publishers });
  const quiet =
    publishers === undefined
      ? ''
      : `CASE WHEN row_number() OVER () = 1 THEN start.publishers_quiet END AS publishers_quiet, `;
  // One row per message, or one row of nulls but the start columns (and the next retry) when
  // nothing was found.
  return p.statement(
    `WITH ${start}
SELECT ${quiet}${startColumns}, ${nextRetryColumns(messages, 'polled', outbox, partition)}, polled.* FROM start LEFT JOIN (${polled}) AS polled ON true`,
    (rows) => readPoll(rows, lease.outbox),
    true,
  );
}

/**
 * The ready rows of a partition after the cursor, as two row comparisons that only `_ready
 * (outbox, partition, id)` can serve, with the scan starting at the cursor: the index holds
 * entries of delivered rows below it until vacuum. Not `outbox = $1 AND partition = $2 AND …`:
 * next to those equalities Postgres (before 18) treats a row comparison as redundant and scans
 * the partition from its first entry (two orders of magnitude slower with a deep backlog of
 * entries below the cursor), and with `id > $4` instead the planner may walk the primary key and
 * filter. The caller orders by `outbox, partition, id`, an order only `_ready` provides. `prefix`
 * is the table's alias with its dot (`m.`), or empty.
 */
function afterCursor(prefix: string, $: PollPlaceholders): string {
  const [outbox, partition, id] = ['outbox', 'partition', 'id'].map((c) => `${prefix}${c}`);
  const [o, p] = [`(SELECT ${$.outbox}::text)`, `(SELECT ${$.partition}::int)`];
  return `(${outbox}, ${partition}, ${id}) > (${o}, ${p}, ${$.afterId}) AND (${outbox}, ${partition}) <= (${o}, ${p})`;
}

/**
 * The poll's LIMIT, as a value the planner cannot see. With every value it would estimate hidden
 * (this, the cursor, the id arrays), a plan built for the values is no cheaper than the generic
 * one, so a prepared poll settles on the generic plan and stops planning (a fraction of a
 * millisecond a statement).
 */
function limitOf($: PollPlaceholders): string {
  return `(SELECT ${$.limit}::int)`;
}

/**
 * Leaves out the excluded ids, of the table whose alias with its dot is `prefix` (`m.`, or empty).
 * Only rows at or below `above` can be excluded ones: the others skip the array check.
 */
function notExcluded(prefix: string, $: PollPlaceholders): string {
  return $.exclude === undefined
    ? ''
    : ` AND (${prefix}id > ${$.exclude.above} OR ${prefix}id <> ALL(${opaque($.exclude.ids, 'bigint')}))`;
}

/** The poll's rows, unordered: the reader orders them by id. */
export function pollText(messages: string, params: PollParams, $: PollPlaceholders): string {
  const due = `COALESCE(${$.due}::timestamptz, now())`;
  if (params.ordering === 'total') {
    // One order for the whole outbox: while any message waits for its retry, nothing else moves.
    // Reads the retry index (outbox, partition, next_attempt_at) WHERE status = retry, then the ready index.
    return `WITH head AS (
  SELECT id, next_attempt_at FROM ${messages} m WHERE outbox = ${$.outbox} AND partition = ${$.partition} AND ${blockingStatus(params.parkDead)}${notExcluded('m.', $)} ORDER BY id LIMIT 1
)
SELECT ${COLUMNS}, false AS blocked FROM ${messages}
WHERE id = (SELECT id FROM head WHERE next_attempt_at <= ${due})
UNION ALL
(SELECT ${COLUMNS}, false AS blocked FROM ${messages}
 WHERE NOT EXISTS (SELECT 1 FROM head) AND status = ${Status.ready} AND ${afterCursor('', $)}${notExcluded('', $)}
 ORDER BY outbox, partition, id LIMIT ${limitOf($)})`;
  }
  // Ready messages of a group whose head waits for a retry are flagged `blocked`; the engine moves
  // them to `held` so later polls never step over them. The probe reads the tiny index
  // (outbox, group_key) WHERE status IN (retry, dead), and only when the outbox has a blocking
  // message at all (one probe of `_retry`, or `_dead` when dead heads park their group): a drain
  // without failures skips a probe per row. Evaluated on the same snapshot, the first test cannot
  // miss a head the second would find. The probe is a scalar subquery, not EXISTS: the planner,
  // which cannot see the LIMIT, expects a thousand rows and would turn an EXISTS into one hashed
  // pass over every blocking message of the outbox (more than twice the cost of an unblocked poll
  // with thousands of blocked groups); a scalar subquery is never hashed and stays one index probe
  // per row.
  const anyBlocking = params.parkDead
    ? `(SELECT EXISTS (SELECT 1 FROM ${messages} r WHERE r.outbox = ${$.outbox} AND r.status = ${Status.retry}) OR EXISTS (SELECT 1 FROM ${messages} d WHERE d.outbox = ${$.outbox} AND d.status = ${Status.dead}))`
    : `(SELECT EXISTS (SELECT 1 FROM ${messages} r WHERE r.outbox = ${$.outbox} AND r.status = ${Status.retry}))`;
  const blocked =
    params.ordering === 'group'
      ? `(m.group_key IS NOT NULL AND ${anyBlocking} AND COALESCE((SELECT true FROM ${messages} h WHERE h.outbox = m.outbox AND h.group_key = m.group_key AND ${blockingStatus(params.parkDead, 'h.status')} LIMIT 1), false))`
      : 'false';
  return `SELECT ${COLUMNS}, blocked FROM (
  (SELECT m.*, false AS blocked FROM ${messages} m
   WHERE m.outbox = ${$.outbox} AND m.partition = ${$.partition} AND m.status = ${Status.retry} AND m.next_attempt_at <= ${due}${notExcluded('m.', $)}
   ORDER BY m.next_attempt_at LIMIT ${limitOf($)})
  UNION ALL
  (SELECT m.*, ${blocked} AS blocked FROM ${messages} m
   WHERE m.status = ${Status.ready} AND ${afterCursor('m.', $)}${notExcluded('m.', $)}
   ORDER BY m.outbox, m.partition, m.id LIMIT ${limitOf($)})
) AS batch`;
}
