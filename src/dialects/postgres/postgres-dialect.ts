import type {
  RecordedConfiguration,
  AcquireParams,
  Dialect,
  InsertOptions,
  InsertRow,
  LeaseToken,
  PollParams,
  SettleParams,
  SqlQuery,
} from '../../core/database.js';
import { companion, quoteName, type QualifiedName } from '../../core/identifiers.js';
import { figures, postgresSchema } from './postgres-schema.js';
import { readEnvelope } from '../shared/columns.js';
import { blockingStatus } from '../shared/statuses.js';

/**
 * Every statement outboxer runs on Postgres. Status values: 0 ready, 1 retry, 2 held, 3 dead,
 * 4 delivered (see docs/ordering.md). Each comment names the index a statement reads.
 */

const MS = `* interval '1 millisecond'`;
/**
 * What a poll or a listing reads. Timestamps travel as Unix milliseconds (float8), which the
 * driver reads as a number, where a timestamptz is formatted as text by the server and parsed back
 * with a regular expression by pg: 3% of a draining relay's time.
 */
const epochMs = (column: string) => `date_part('epoch', ${column}) * 1000 AS ${column}`;
const COLUMNS = `id, partition, group_key, type, payload::text AS payload, headers::text AS headers, attempts, last_error, ${epochMs('next_attempt_at')}, ${epochMs('failing_since')}, ${epochMs('inserted_at')}, status`;

/**
 * An array parameter the planner cannot look into: `id = ANY($1)` with a constant array makes the
 * planner estimate every element (1.5 ms of planning for a batch of 1,000), while an InitPlan's
 * array is one unknown value. The executor reads it once.
 */
function opaque(param: string, type: 'bigint'): string {
  // The cast keeps `= ANY(…)` the array form: `= ANY((SELECT …))` would compare with each row.
  return `(SELECT ${param}::${type}[])::${type}[]`;
}

type Tables = ReturnType<typeof tables>;

function tables(table: QualifiedName) {
  return {
    messages: quoteName(table),
    leases: quoteName(companion(table, 'leases')),
    nodes: quoteName(companion(table, 'nodes')),
    tallies: quoteName(companion(table, 'tallies')),
  };
}

/**
 * The change a statement made to the outbox's figures, as one tally row per partition, written
 * by the statement itself (a data-modifying CTE over the rows `changed` returned), so the figures
 * `counts()` sums commit or roll back with the change. No row when nothing changed. Tallies are
 * inserted, never updated: publishers take no lock a counter row would serialise them on.
 * `change` gives pending, dead, delivered as aggregates over `changed` (column `partition`, and
 * `status` where `change` reads it), for the outbox $1.
 */
function tally(tallies: string, changed: string, change: string): string {
  return `INSERT INTO ${tallies} (outbox, partition, pending, dead, delivered) SELECT $1, partition, ${change} FROM ${changed} GROUP BY partition`;
}

/**
 * A worker's tally of the rows it settled (`changed`, with column `status`), those matching
 * `where`: all in its own partition ($2), which it polled them from. A plain aggregate, not a
 * grouping one: this runs with every batch.
 */
function workerTally(tallies: string, changed: string, change: string, where = ''): string {
  return `INSERT INTO ${tallies} (outbox, partition, pending, dead, delivered) SELECT $1, $2, ${change} FROM ${changed}${where} HAVING count(*) > 0`;
}

/** Rows removed, by the status they had. */
const REMOVED = figures('-');
/** Pending rows that were delivered and kept. */
const KEPT = '-count(*), 0, count(*)';

/** `true` when the lease still belongs to the worker; $1..$4 = outbox, partition, owner, epoch. */
function fence(leases: string): string {
  return `EXISTS (SELECT 1 FROM ${leases} WHERE outbox = $1 AND partition = $2 AND owner = $3 AND epoch = $4)`;
}

function leaseValues(lease: LeaseToken): unknown[] {
  return [lease.outbox, lease.partition, lease.owner, lease.epoch];
}

function insert(table: QualifiedName, rows: readonly InsertRow[], options: InsertOptions): SqlQuery {
  const { messages: t, tallies } = tables(table);
  const columns = `(outbox, partition, group_key, type, payload, headers)`;
  const values: unknown[] = [];
  const param = (value: unknown): string => {
    values.push(value);
    return `$${values.length}`;
  };
  // One row: plain parameters. Many: one parameter per column, unnested in the order given
  // (ORDER BY ord: ids are drawn in that order).
  const single = rows.length === 1;
  const select = single
    ? (() => {
        const r = rows[0]!;
        return `SELECT ${param(r.outbox)}, ${param(r.partition)}::int, ${param(r.groupKey)}, ${param(r.type)}, ${param(r.payload)}::json, ${param(r.headers)}::json`;
      })()
    : `SELECT r.outbox, r.partition, r.group_key, r.type, r.payload, r.headers`;
  const sources = single
    ? []
    : [
        `unnest(${param(rows.map((r) => r.outbox))}::text[], ${param(rows.map((r) => r.partition))}::int[], ${param(rows.map((r) => r.groupKey))}::text[], ${param(rows.map((r) => r.type))}::text[], ${param(rows.map((r) => r.payload))}::json[], ${param(rows.map((r) => r.headers))}::json[]) WITH ORDINALITY AS r(outbox, partition, group_key, type, payload, headers, ord)`,
      ];
  const lockKeys = options.serialize ? distinctSorted(rows.map((row) => row.groupKey)) : [];
  if (lockKeys.length === 1) {
    sources.push(`(SELECT pg_advisory_xact_lock(hashtextextended(${param(lockKeys[0])}, 0))) AS serialized`);
  } else if (lockKeys.length > 1) {
    // Sorted keys: two publishers of overlapping groups lock in the same order and cannot deadlock.
    sources.push(
      `(SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) FROM unnest(${param(lockKeys)}::text[]) AS k) AS serialized`,
    );
  }
  if (options.notify !== undefined) {
    // Postgres folds identical notifications of one transaction: one per partition reaches relays.
    const { channel, payloads } = options.notify;
    sources.push(
      payloads.length === 1
        ? `(SELECT ${coalescedNotify(param(channel), param(payloads[0]))}) AS notified`
        : `(SELECT count(${coalescedNotify(param(channel), 'p')}) FROM unnest(${param(payloads)}::text[]) AS p) AS notified`,
    );
  }
  // The transaction gets its id before the rows get theirs, so a poll that sees a larger id
  // committed sees this transaction in flight (or ended): see startCtes.
  sources.push(`(SELECT 1 WHERE pg_current_xact_id() IS NOT NULL) AS xact`);
  // The locks and notifications sit in FROM, so they run before the row gets its id.
  const from = sources.length === 0 ? '' : ` FROM ${sources.join(', ')}`;
  const order = single ? '' : ' ORDER BY r.ord';
  // Prepared: a publish is one short statement, whose parsing and planning cost the server as much
  // as its execution (10 writers on 2 cores: 87% of a plain INSERT unprepared, 105% prepared).
  // One tally per outbox and partition published to (one row: no grouping).
  const tallied = single
    ? `SELECT outbox, partition, 1, 0, 0 FROM inserted`
    : `SELECT outbox, partition, count(*), 0, 0 FROM inserted GROUP BY outbox, partition`;
  return {
    prepare: true,
    text: `WITH inserted AS (INSERT INTO ${t} ${columns} ${select}${from}${order} RETURNING id, outbox, partition),
tallied AS (INSERT INTO ${tallies} (outbox, partition, pending, dead, delivered) ${tallied})
SELECT id FROM inserted`,
    values,
  };
}

/**
 * The advisory lock keys of a notify payload: `publishing`, held shared by every transaction that
 * publishes with it until it ends, and `notifying`, held by the one that will send it.
 */
function notifyLock(kind: 'publishing' | 'notifying', payload: string): string {
  return `hashtextextended('outboxer ${kind} ' || ${payload}, 0)`;
}

/**
 * NOTIFY, unless another transaction in flight will send the same payload when it commits.
 * Postgres serialises the commits of notifying transactions (one global lock, held through the
 * commit's WAL flush), so ten writers that all notify lose a third to a half of their rate; this
 * way one transaction per payload notifies at a time. Every publisher holds `publishing` until it
 * ends, so a relay polls again, rather than waiting for a notification, until a poll finds none
 * in flight (`checkPublishers`); a relay testing `publishing` at that very moment makes the
 * publisher notify anyway. (The transaction id comes first for the late-commit watch: startCtes.)
 */
function coalescedNotify(channel: string, payload: string): string {
  return `CASE WHEN pg_current_xact_id() IS NULL THEN NULL
    WHEN NOT pg_try_advisory_xact_lock_shared(${notifyLock('publishing', payload)}) THEN pg_notify(${channel}, ${payload})
    WHEN pg_try_advisory_xact_lock(${notifyLock('notifying', payload)}) THEN pg_notify(${channel}, ${payload}) END`;
}

function distinctSorted(keys: readonly (string | null)[]): string[] {
  const set = new Set<string>();
  for (const key of keys) if (key !== null) set.add(key);
  return [...set].sort();
}

function dueParam(dueBefore: PollParams['dueBefore']): string | Date | null {
  return dueBefore === 'infinity' ? 'infinity' : dueBefore;
}

/** Placeholders of the poll's inputs, so the poll can be embedded in another statement. */
interface PollPlaceholders {
  readonly outbox: string;
  readonly partition: string;
  readonly limit: string;
  readonly afterId: string;
  readonly due: string;
  /** Ids to leave out (see `PollParams.exclude`), all at or below `above`. */
  readonly exclude?: { readonly ids: string; readonly above: string };
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

/** Placeholders of what decides where a poll starts (see `startCtes`). */
interface StartPlaceholders {
  readonly outbox: string;
  readonly partition: string;
  readonly afterId: string;
  readonly xids: string;
  readonly rewindTo: string;
  readonly rewindsSeen: string;
  readonly publishers?: string;
}

/**
 * Where the poll starts, decided on its own snapshot (see `PollParams.watch`): the cursor, or the
 * lowest `rewindTo` of a watched transaction that has ended since, which may have committed
 * messages below the cursor, or the beginning when the partition's lease row counts a rewind the
 * worker has not seen (see `PollParams.rewindsSeen`). Also the writing transactions the snapshot
 * sees in flight (the statement's own excluded), which the engine watches if it moves the cursor
 * on, and the rewinds counted.
 */
function startCtes(leases: string, $: StartPlaceholders): string {
  // Tested once the snapshot is taken. The lock is this statement's own: a publisher that tries
  // `publishing` meanwhile notifies.
  const quiet =
    $.publishers === undefined
      ? ''
      : `pg_try_advisory_xact_lock(${notifyLock('publishing', `${$.publishers}::text`)}) AS publishers_quiet,
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
 * (the engine reads them there): the rows after it carry nulls, which cost the driver nothing to
 * parse. The rows come unsorted (the engine orders them by id): without a sort, Postgres streams
 * them out as it reads them, and the client parses the first while the server reads the last (a
 * poll of 100 rows: 0.50 → 0.45 ms at the client, 0.183 → 0.171 ms on the server).
 */
const startColumns = `CASE WHEN row_number() OVER () = 1 THEN start.after_id END AS after_id,
  CASE WHEN row_number() OVER () = 1 THEN start.in_flight END AS in_flight,
  CASE WHEN row_number() OVER () = 1 THEN start.rewinds END AS rewinds`;

function watchValues(params: PollParams): [string[], number[]] {
  return [[...(params.watch?.xids ?? [])], [...(params.watch?.rewindTo ?? [])]];
}

/** The `exclude` ids and the largest of them, as parameter values. */
function excludeValues(params: PollParams): [number[], number] {
  const ids = [...(params.exclude ?? [])];
  return [ids, Math.max(0, ...ids)];
}

function poll(table: QualifiedName, params: PollParams): SqlQuery {
  const { lease } = params;
  const excluding = (params.exclude ?? []).length > 0;
  const polled = pollText(tables(table).messages, params, {
    outbox: '$1',
    partition: '$2',
    limit: '$3',
    afterId: '(SELECT after_id FROM start)',
    due: '$5',
    ...(excluding ? { exclude: { ids: '$8', above: '$9' } } : {}),
  });
  const values = [
    lease.outbox,
    lease.partition,
    params.limit,
    params.afterId,
    dueParam(params.dueBefore),
    ...watchValues(params),
    ...(excluding ? excludeValues(params) : []),
    params.rewindsSeen ?? null,
  ];
  const rewindsSeen = `$${values.length}`;
  const checking = params.checkPublishers !== undefined;
  if (checking) values.push(params.checkPublishers);
  const quiet = checking
    ? `CASE WHEN row_number() OVER () = 1 THEN start.publishers_quiet END AS publishers_quiet, `
    : '';
  const start = startCtes(tables(table).leases, {
    outbox: '$1',
    partition: '$2',
    afterId: '$4',
    xids: '$6',
    rewindTo: '$7',
    rewindsSeen,
    ...(checking ? { publishers: `$${values.length}` } : {}),
  });
  // One row per message, or one row of nulls but the start columns when nothing was found.
  return {
    prepare: true,
    text: `WITH ${start}
SELECT ${quiet}${startColumns}, polled.* FROM start LEFT JOIN (${polled}) AS polled ON true`,
    values,
  };
}

/**
 * The ready rows of a partition after the cursor, as two row comparisons that only `_ready
 * (outbox, partition, id)` can serve, with the scan starting at the cursor: the index holds
 * entries of delivered rows below it until vacuum. Not `outbox = $1 AND partition = $2 AND …`:
 * next to those equalities Postgres (before 18) treats a row comparison as redundant and scans
 * the partition from its first entry (measured: 3.8 ms against 0.05 ms with 100,000 entries
 * below the cursor), and with `id > $4` instead the planner may walk the primary key and filter.
 * The caller orders by `outbox, partition, id`, an order only `_ready` provides.
 */
function afterCursor(alias: string, $: PollPlaceholders): string {
  const [outbox, partition, id] = ['outbox', 'partition', 'id'].map((c) => `${alias}${c}`);
  const [o, p] = [`(SELECT ${$.outbox}::text)`, `(SELECT ${$.partition}::int)`];
  return `(${outbox}, ${partition}, ${id}) > (${o}, ${p}, ${$.afterId}) AND (${outbox}, ${partition}) <= (${o}, ${p})`;
}

/**
 * The poll's LIMIT, as a value the planner cannot see. With every value it would estimate hidden
 * (this, the cursor, the id arrays), a plan built for the values is no cheaper than the generic
 * one, so a prepared poll settles on the generic plan and stops planning (0.5 ms a statement).
 */
function limitOf($: PollPlaceholders): string {
  return `(SELECT ${$.limit}::int)`;
}

/** The poll's rows, unordered: the engine orders them by id. */
function pollText(messages: string, params: PollParams, $: PollPlaceholders): string {
  const due = `COALESCE(${$.due}::timestamptz, now())`;
  // Only rows at or below `above` can be excluded ones: the others skip the array check.
  const notExcluded =
    $.exclude === undefined
      ? ''
      : ` AND (m.id > ${$.exclude.above} OR m.id <> ALL(${opaque($.exclude.ids, 'bigint')}))`;
  if (params.ordering === 'total') {
    // One order for the whole outbox: while any message waits for its retry, nothing else moves.
    // Reads the retry index (outbox, partition, next_attempt_at) WHERE status = 1, then the ready index.
    return `WITH head AS (
  SELECT id, next_attempt_at FROM ${messages} m WHERE outbox = ${$.outbox} AND partition = ${$.partition} AND ${blockingStatus(params.parkDead)}${notExcluded} ORDER BY id LIMIT 1
)
SELECT ${COLUMNS}, false AS blocked FROM ${messages}
WHERE id = (SELECT id FROM head WHERE next_attempt_at <= ${due})
UNION ALL
(SELECT ${COLUMNS}, false AS blocked FROM ${messages}
 WHERE NOT EXISTS (SELECT 1 FROM head) AND status = 0 AND ${afterCursor('', $)}${notExcluded.replaceAll('m.id', 'id')}
 ORDER BY outbox, partition, id LIMIT ${limitOf($)})`;
  }
  // Ready messages of a group whose head waits for a retry are flagged `blocked`; the engine moves
  // them to `held` so later polls never step over them. The probe reads the tiny index
  // (outbox, group_key) WHERE status IN (1, 3), and only when the outbox has a blocking message at
  // all (one probe of `_retry`, or `_dead` when dead heads park their group): a drain without
  // failures skips a probe per row. Evaluated on the same snapshot, the first test cannot miss a
  // head the second would find. The probe is a scalar subquery, not EXISTS: the planner, which
  // cannot see the LIMIT, expects a thousand rows and would turn an EXISTS into one hashed pass
  // over every blocking message of the outbox (2.4 times the cost of an unblocked poll with 2,000
  // blocked groups); a scalar subquery is never hashed and stays one index probe per row.
  const anyBlocking = params.parkDead
    ? `(SELECT EXISTS (SELECT 1 FROM ${messages} r WHERE r.outbox = ${$.outbox} AND r.status = 1) OR EXISTS (SELECT 1 FROM ${messages} d WHERE d.outbox = ${$.outbox} AND d.status = 3))`
    : `(SELECT EXISTS (SELECT 1 FROM ${messages} r WHERE r.outbox = ${$.outbox} AND r.status = 1))`;
  const blocked =
    params.ordering === 'group'
      ? `(m.group_key IS NOT NULL AND ${anyBlocking} AND COALESCE((SELECT true FROM ${messages} h WHERE h.outbox = m.outbox AND h.group_key = m.group_key AND ${blockingStatus(params.parkDead, 'h.status')} LIMIT 1), false))`
      : 'false';
  return `SELECT ${COLUMNS}, blocked FROM (
  (SELECT m.*, false AS blocked FROM ${messages} m
   WHERE m.outbox = ${$.outbox} AND m.partition = ${$.partition} AND m.status = 1 AND m.next_attempt_at <= ${due}${notExcluded}
   ORDER BY m.next_attempt_at LIMIT ${limitOf($)})
  UNION ALL
  (SELECT m.*, ${blocked} AS blocked FROM ${messages} m
   WHERE m.status = 0 AND ${afterCursor('m.', $)}${notExcluded}
   ORDER BY m.outbox, m.partition, m.id LIMIT ${limitOf($)})
) AS batch`;
}

function hold(
  table: QualifiedName,
  lease: LeaseToken,
  ids: readonly number[],
  groups: readonly string[],
  parkDead: boolean,
): SqlQuery {
  const { messages, leases } = tables(table);
  // FOR SHARE on the blocking heads: a concurrent settle that removes a head waits for this
  // statement, and its later unhold statement then sees the rows held here. A head removed
  // first is not found, and nothing is held. Fenced on the lease like every write of a worker.
  return {
    prepare: true,
    text: `WITH heads AS (
  SELECT group_key FROM ${messages} WHERE outbox = $1 AND ${blockingStatus(parkDead)} AND group_key = ANY($2::text[]) FOR SHARE
)
UPDATE ${messages} SET status = 2
WHERE id = ANY($3::bigint[]) AND status = 0 AND group_key IN (SELECT group_key FROM heads)
  AND EXISTS (SELECT 1 FROM ${leases} WHERE outbox = $1 AND partition = $4 AND owner = $5 AND epoch = $6)
RETURNING id`,
    values: [lease.outbox, groups, ids, lease.partition, lease.owner, lease.epoch],
  };
}

function nextRetryAt(table: QualifiedName, outbox: string, partition: number): SqlQuery {
  const { messages } = tables(table);
  return {
    prepare: true,
    text: `SELECT min(next_attempt_at) AS next_attempt_at, now() AS now FROM ${messages} WHERE outbox = $1 AND partition = $2 AND status = 1`,
    values: [outbox, partition],
  };
}

/**
 * The common settle (everything delivered, nothing failed, no group unblocked) as CTEs: renew the
 * lease (its row lock makes a takeover wait) and acknowledge, fenced on that renewal. $1..$6.
 *
 * Committed asynchronously (`synchronous_commit` off for this transaction only): the commit does
 * not wait for its WAL flush, one flush a batch that a draining relay would otherwise add to the
 * database's I/O. A Postgres crash can forget the last acknowledgements (up to three times
 * `wal_writer_delay`, 600 ms by default), whose messages are then delivered again, as at-least-once
 * allows; it cannot forget a message, since what is lost is a deletion. WAL is replayed in order,
 * so what survives is a prefix: a group's later acknowledgement never survives an earlier one.
 */
function acknowledgeCtes({ messages, leases, tallies }: Tables, keep: boolean): string {
  const acknowledge = keep
    ? `UPDATE ${messages} SET status = 4, delivered_at = now(), next_attempt_at = NULL WHERE id = ANY(${opaque('$6', 'bigint')}) AND outbox = $1 AND status < 3 AND EXISTS (SELECT 1 FROM lease)`
    : `DELETE FROM ${messages} WHERE id = ANY(${opaque('$6', 'bigint')}) AND outbox = $1 AND EXISTS (SELECT 1 FROM lease)`;
  return `WITH lease AS (
  UPDATE ${leases} SET lease_until = clock_timestamp() + $5 ${MS}
  FROM (SELECT set_config('synchronous_commit', 'off', true)) AS asynchronous_commit
  WHERE outbox = $1 AND partition = $2 AND owner = $3 AND epoch = $4 RETURNING epoch
), acknowledged AS (${acknowledge} RETURNING status
), tallied AS (${workerTally(tallies, 'acknowledged', keep ? KEPT : REMOVED)})`;
}

function isAcknowledgeOnly(params: SettleParams): boolean {
  return params.failed.length === 0 && params.unblockedGroups.length === 0 && params.delivered.length > 0;
}

function settle(table: QualifiedName, params: SettleParams): SqlQuery[] {
  const t = tables(table);
  const { messages, leases, tallies } = t;
  const lease = leaseValues(params.lease);
  if (isAcknowledgeOnly(params)) {
    // One autocommit statement. Returns the lease row, or none when lost.
    return [
      {
        prepare: true,
        text: `${acknowledgeCtes(t, params.keep)}\nSELECT epoch FROM lease`,
        values: [...lease, params.ttl, params.delivered],
      },
    ];
  }
  // Row lock on the lease: a takeover waits until this transaction ends, or this finds nothing.
  const statements: SqlQuery[] = [renewLease(table, params.lease, params.ttl)];
  if (params.delivered.length > 0) {
    statements.push({
      prepare: true,
      text: `WITH acknowledged AS (${
        params.keep
          ? `UPDATE ${messages} SET status = 4, delivered_at = now(), next_attempt_at = NULL WHERE id = ANY(${opaque('$5', 'bigint')}) AND outbox = $1 AND status < 3 AND ${fence(leases)}`
          : `DELETE FROM ${messages} WHERE id = ANY(${opaque('$5', 'bigint')}) AND outbox = $1 AND ${fence(leases)}`
      } RETURNING status)
${workerTally(tallies, 'acknowledged', params.keep ? KEPT : REMOVED)}`,
      values: [...lease, params.delivered],
    });
  }
  if (params.failed.length > 0) {
    const f = params.failed;
    statements.push({
      prepare: true,
      // Only the messages that died change a figure: pending to dead.
      text: `WITH failed AS (UPDATE ${messages} AS m SET attempts = m.attempts + 1, last_error = f.error,
  status = CASE WHEN f.dead THEN 3 ELSE 1 END,
  next_attempt_at = CASE WHEN f.dead THEN NULL ELSE now() + f.delay ${MS} END,
  failing_since = coalesce(m.failing_since, now())
FROM unnest($5::bigint[], $6::text[], $7::boolean[], $8::float8[]) AS f(id, error, dead, delay)
WHERE m.id = f.id AND m.outbox = $1 AND m.status < 3 AND ${fence(leases)} RETURNING m.status)
${workerTally(tallies, 'failed', '-count(*), count(*), 0', ' WHERE status = 3')}`,
      values: [
        ...lease,
        f.map((x) => x.id),
        f.map((x) => x.error),
        f.map((x) => x.dead),
        f.map((x) => x.delay),
      ],
    });
  }
  if (params.unblockedGroups.length > 0) {
    // A separate statement, so it sees rows held by a concurrent poll that our head change waited for.
    statements.push(unhold(messages, params.lease.outbox, params.unblockedGroups, params.parkDead));
  }
  return statements;
}

function acknowledgeAndPoll(
  table: QualifiedName,
  settleParams: SettleParams,
  pollParams: PollParams,
): SqlQuery {
  if (!isAcknowledgeOnly(settleParams))
    throw new Error('acknowledgeAndPoll takes an acknowledge-only settle');
  const t = tables(table);
  const { messages, leases } = t;
  // The poll runs on the statement's snapshot, which still shows the rows acknowledged here: the
  // engine passes them in `exclude`, with the ones it is delivering meanwhile.
  const [excluded, excludedAbove] = excludeValues(pollParams);
  const exclude = new Set(excluded);
  if (settleParams.delivered.some((id) => !exclude.has(id)))
    throw new Error('acknowledgeAndPoll: every acknowledged id must be excluded from the poll');
  const polled = pollText(messages, pollParams, {
    outbox: '$1',
    partition: '$2',
    limit: '$7',
    afterId: '(SELECT after_id FROM start)',
    due: '$9',
    exclude: { ids: '$10', above: '$13' },
  });
  // One row per polled message, a row of nulls but the lease and start columns when the poll is
  // empty, no row when the lease is lost. The lease's epoch is on the first row only, like the
  // start columns: every other row would make the driver parse one more bigint.
  return {
    prepare: true,
    text: `${acknowledgeCtes(t, settleParams.keep)}, ${startCtes(leases, {
      outbox: '$1',
      partition: '$2',
      afterId: '$8',
      xids: '$11',
      rewindTo: '$12',
      rewindsSeen: '$14',
    })}
SELECT CASE WHEN row_number() OVER () = 1 THEN lease.epoch END AS lease_epoch, ${startColumns}, polled.*
FROM lease CROSS JOIN start LEFT JOIN (${polled}) AS polled ON true`,
    values: [
      ...leaseValues(settleParams.lease),
      settleParams.ttl,
      settleParams.delivered,
      pollParams.limit,
      pollParams.afterId,
      dueParam(pollParams.dueBefore),
      excluded,
      ...watchValues(pollParams),
      excludedAbove,
      pollParams.rewindsSeen ?? null,
    ],
  };
}

function unhold(
  messages: string,
  outbox: string,
  groups: readonly string[] | undefined,
  parkDead: boolean,
): SqlQuery {
  const groupFilter = groups === undefined ? '' : 'AND m.group_key = ANY($2::text[])';
  return {
    prepare: true,
    text: `UPDATE ${messages} AS m SET status = 0
WHERE m.outbox = $1 AND m.status = 2 ${groupFilter}
  AND NOT EXISTS (SELECT 1 FROM ${messages} h WHERE h.outbox = m.outbox AND h.group_key = m.group_key AND ${blockingStatus(parkDead, 'h.status')})
RETURNING m.id`,
    values: groups === undefined ? [outbox] : [outbox, groups],
  };
}

/**
 * Leases run from the moment they are written (`clock_timestamp()`), not from the statement's
 * start (`now()`): a statement that waited seconds for the lease row's lock (its holder paused
 * mid-settle) would otherwise grant a lease that has already expired, and a second node would take
 * the partition while the first starts delivering it.
 */
function acquireLease(table: QualifiedName, p: AcquireParams): SqlQuery {
  const { leases } = tables(table);
  return {
    text: `INSERT INTO ${leases} AS l (outbox, partition, owner, epoch, lease_until)
VALUES ($1, $2, $3, 1, clock_timestamp() + $4 ${MS})
ON CONFLICT (outbox, partition) DO UPDATE
  SET owner = EXCLUDED.owner, epoch = l.epoch + 1, lease_until = clock_timestamp() + $4 ${MS}
  WHERE l.lease_until < now() OR l.owner = EXCLUDED.owner
RETURNING epoch`,
    values: [p.outbox, p.partition, p.owner, p.ttl],
  };
}

function renewLease(table: QualifiedName, lease: LeaseToken, ttl: number): SqlQuery {
  const { leases } = tables(table);
  return {
    prepare: true,
    text: `UPDATE ${leases} SET lease_until = clock_timestamp() + $5 ${MS} WHERE outbox = $1 AND partition = $2 AND owner = $3 AND epoch = $4 RETURNING epoch`,
    values: [...leaseValues(lease), ttl],
  };
}

function releaseLease(table: QualifiedName, lease: LeaseToken): SqlQuery {
  const { leases } = tables(table);
  return {
    text: `UPDATE ${leases} SET lease_until = '-infinity' WHERE outbox = $1 AND partition = $2 AND owner = $3 AND epoch = $4 RETURNING epoch`,
    values: leaseValues(lease),
  };
}

function heartbeat(table: QualifiedName, outbox: string, nodeId: string, ttl: number): SqlQuery[] {
  const { nodes, leases } = tables(table);
  // Counts live relaying nodes (this one included) and returns the live leases, so the engine can
  // aim for its fair share of partitions. Nodes silent for ten lease periods are forgotten.
  return [
    {
      text: `WITH beat AS (
  INSERT INTO ${nodes} (outbox, node_id, last_seen) VALUES ($1, $2, now())
  ON CONFLICT (outbox, node_id) DO UPDATE SET last_seen = now() RETURNING 1
), forgotten AS (
  DELETE FROM ${nodes} WHERE outbox = $1 AND last_seen < now() - 10 * $3 ${MS} RETURNING 1
)
SELECT (SELECT 1 + count(*) FROM ${nodes} WHERE outbox = $1 AND node_id <> $2 AND last_seen > now() - $3 ${MS})::int AS live_nodes,
  (SELECT count(*) FROM beat)::int AS beat,
  (SELECT count(*) FROM forgotten)::int AS forgotten,
  coalesce((SELECT json_agg(json_build_object('partition', partition, 'owner', owner)) FROM ${leases} WHERE outbox = $1 AND lease_until >= now()), '[]'::json)::text AS leases`,
      values: [outbox, nodeId, ttl],
    },
  ];
}

function removeNode(table: QualifiedName, outbox: string, nodeId: string): SqlQuery {
  const { nodes } = tables(table);
  return { text: `DELETE FROM ${nodes} WHERE outbox = $1 AND node_id = $2`, values: [outbox, nodeId] };
}

/**
 * The figures from the outbox's tallies (see `tally`): exact on the statement's snapshot, since
 * every change commits with its tally, and read from a few rows per partition however deep the
 * backlog, so `upTo` has nothing to save. The oldest pending message is one probe of each of the
 * three pending indexes.
 */
function counts(table: QualifiedName, outbox: string, partitions: number): SqlQuery {
  const { messages, nodes, tallies } = tables(table);
  return {
    text: `SELECT coalesce(sum(pending), 0) AS pending, coalesce(sum(delivered), 0) AS delivered, coalesce(sum(dead), 0) AS dead,
  coalesce(sum(pending) FILTER (WHERE partition >= $2), 0) AS orphaned,
  (SELECT min(inserted_at) FROM ${messages} WHERE id = (SELECT min(id) FROM ${messages} WHERE outbox = $1 AND status IN (0, 1, 2))) AS oldest_pending_at,
  (SELECT max(last_seen) FROM ${nodes} WHERE outbox = $1) AS relay_seen_at
FROM ${tallies} WHERE outbox = $1`,
    values: [outbox, partitions],
  };
}

/**
 * Sums each partition's tallies into one row, so `counts()` reads a few rows. Run by the node
 * holding partition 0 at every coordination tick. Two at once still move each row once: the
 * second waits for the first's row locks and skips the rows it deleted.
 */
function compactTallies(table: QualifiedName, outbox: string): SqlQuery {
  const { tallies } = tables(table);
  return {
    text: `WITH gathered AS (
  DELETE FROM ${tallies} WHERE outbox = $1 AND partition IN (SELECT partition FROM ${tallies} WHERE outbox = $1 GROUP BY partition HAVING count(*) > 1)
  RETURNING partition, pending, dead, delivered
), summed AS (
  INSERT INTO ${tallies} (outbox, partition, pending, dead, delivered)
  SELECT $1, partition, sum(pending), sum(dead), sum(delivered) FROM gathered GROUP BY partition
  HAVING sum(pending) <> 0 OR sum(dead) <> 0 OR sum(delivered) <> 0 RETURNING 1
) SELECT (SELECT count(*) FROM gathered)::int AS gathered`,
    values: [outbox],
  };
}

/**
 * When the outbox's last recount is `everyMs` old (or its `<table>_config` row, written when its
 * first relay started: `migrate()` created the tallies from the rows), compares the tallies with
 * the rows on one snapshot and adds the difference as a tally: what changed the rows without
 * tallying (SQL run by hand, a node of a version before tallies). Reads every row of the outbox.
 *
 * Claimed on the outbox's `<table>_config` row, whose `recounted_at` it moves only if the row
 * still holds the value this statement's snapshot saw: a concurrent recount that committed in
 * between makes the claim find nothing (Postgres re-checks the updated row), so two recounts never
 * add the same difference (under REPEATABLE READ the second fails instead). No worker waits for it.
 * Returns the difference, or no row when not due or claimed by another.
 */
function recount(table: QualifiedName, outbox: string, everyMs: number): SqlQuery {
  const { messages, tallies } = tables(table);
  const config = quoteName(companion(table, 'config'));
  return {
    text: `WITH claim AS (
  UPDATE ${config} SET recounted_at = clock_timestamp()
  WHERE outbox = $1 AND recounted_at = (SELECT recounted_at FROM ${config} WHERE outbox = $1)
    AND recounted_at < now() - $2 ${MS}
  RETURNING 1
), actual AS (
  SELECT partition, ${figures('', true)} FROM ${messages} WHERE outbox = $1 GROUP BY partition
), tallied AS (
  SELECT partition, sum(pending) AS pending, sum(dead) AS dead, sum(delivered) AS delivered FROM ${tallies} WHERE outbox = $1 GROUP BY partition
), drift AS (
  SELECT partition, coalesce(a.pending, 0) - coalesce(t.pending, 0) AS pending, coalesce(a.dead, 0) - coalesce(t.dead, 0) AS dead,
    coalesce(a.delivered, 0) - coalesce(t.delivered, 0) AS delivered
  FROM actual a FULL JOIN tallied t USING (partition)
), corrected AS (
  INSERT INTO ${tallies} (outbox, partition, pending, dead, delivered)
  SELECT $1, partition, pending, dead, delivered FROM drift
  WHERE EXISTS (SELECT 1 FROM claim) AND (pending <> 0 OR dead <> 0 OR delivered <> 0) RETURNING pending, dead, delivered
) SELECT coalesce(sum(pending), 0) AS pending, coalesce(sum(dead), 0) AS dead, coalesce(sum(delivered), 0) AS delivered
FROM corrected HAVING EXISTS (SELECT 1 FROM claim)`,
    values: [outbox, everyMs],
  };
}

function readConfiguration(table: QualifiedName, outbox: string): SqlQuery {
  const config = quoteName(companion(table, 'config'));
  return {
    text: `SELECT partitions, ordering, serialize_writes, on_dead FROM ${config} WHERE outbox = $1`,
    values: [outbox],
  };
}

function writeConfiguration(
  table: QualifiedName,
  outbox: string,
  c: RecordedConfiguration,
  onlyIfAbsent = false,
): SqlQuery {
  const config = quoteName(companion(table, 'config'));
  const conflict = onlyIfAbsent
    ? 'DO NOTHING'
    : 'DO UPDATE SET partitions = EXCLUDED.partitions, ordering = EXCLUDED.ordering, serialize_writes = EXCLUDED.serialize_writes, on_dead = EXCLUDED.on_dead, updated_at = now()';
  return {
    text: `INSERT INTO ${config} (outbox, partitions, ordering, serialize_writes, on_dead, updated_at) VALUES ($1, $2, $3, $4, $5, now())
ON CONFLICT (outbox) ${conflict}`,
    values: [outbox, c.partitions, c.ordering, c.serializeWrites, c.onDead],
  };
}

function list(table: QualifiedName, outbox: string, which: 'pending' | 'dead', limit: number): SqlQuery {
  const { messages } = tables(table);
  const filter = which === 'pending' ? 'status < 3' : 'status = 3';
  return {
    text: `SELECT ${COLUMNS}, false AS blocked FROM ${messages} WHERE outbox = $1 AND ${filter} ORDER BY id LIMIT $2`,
    values: [outbox, limit],
  };
}

function retryDead(
  table: QualifiedName,
  outbox: string,
  ids: readonly number[] | undefined,
  parkDead: boolean,
): SqlQuery {
  const { messages, tallies } = tables(table);
  const idFilter = ids === undefined ? '' : 'AND id = ANY($2::bigint[])';
  // A parked message comes back as a due retry, so its group stays held until it is delivered.
  const status = parkDead ? 'CASE WHEN group_key IS NULL THEN 0 ELSE 1 END' : '0';
  const next = parkDead ? 'CASE WHEN group_key IS NULL THEN NULL ELSE now() END' : 'NULL';
  return {
    text: `WITH revived AS (UPDATE ${messages} SET status = ${status}, attempts = 0, next_attempt_at = ${next}, failing_since = NULL WHERE outbox = $1 AND status = 3 ${idFilter} RETURNING id, partition, status),
tallied AS (${tally(tallies, 'revived', 'count(*), -count(*), 0')})
SELECT id FROM revived`,
    values: ids === undefined ? [outbox] : [outbox, ids],
  };
}

function countRewind(table: QualifiedName, outbox: string): SqlQuery {
  return {
    text: `UPDATE ${tables(table).leases} SET rewinds = rewinds + 1 WHERE outbox = $1`,
    values: [outbox],
  };
}

function blockedGroups(table: QualifiedName, outbox: string, limit: number, parkDead: boolean): SqlQuery {
  const { messages } = tables(table);
  // Heads from the _blocking index; the waiting count reads the group's pending rows.
  return {
    text: `SELECT h.group_key, h.id, h.status, h.attempts, h.last_error, h.next_attempt_at, h.failing_since,
  (SELECT count(*) FROM ${messages} w WHERE w.outbox = h.outbox AND w.group_key = h.group_key AND w.status IN (0, 2) AND w.id > h.id) AS waiting
FROM ${messages} h WHERE h.outbox = $1 AND h.group_key IS NOT NULL AND ${blockingStatus(parkDead, 'h.status')}
ORDER BY h.id LIMIT $2`,
    values: [outbox, limit],
  };
}

function discard(table: QualifiedName, outbox: string, ids: readonly number[]): SqlQuery {
  const { messages, tallies } = tables(table);
  return {
    text: `WITH discarded AS (DELETE FROM ${messages} WHERE outbox = $1 AND id = ANY($2::bigint[]) AND status <> 4 RETURNING id, partition, status),
tallied AS (${tally(tallies, 'discarded', REMOVED)})
SELECT id FROM discarded`,
    values: [outbox, ids],
  };
}

function prune(table: QualifiedName, outbox: string, olderThanSeconds: number, limit: number): SqlQuery[] {
  const { messages, tallies } = tables(table);
  // Reads the range of the index (outbox, delivered_at) WHERE status = 4 that is older than the
  // window, oldest first, and nothing else; dead messages (status 3) are never pruned.
  // Deletes by physical position: `ctid = ANY(ARRAY(…))` is a TID scan, one heap visit a row, where
  // deleting by `id` added a primary-key lookup (1.5× slower) and `IN (SELECT …)` became a hash
  // join over the table. A row updated meanwhile has moved, no longer matches, and stays. Every
  // pruned row was delivered: its tally needs only its partition.
  return [
    {
      text: `WITH pruned AS (
  DELETE FROM ${messages} WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM ${messages} WHERE outbox = $1 AND status = 4 AND delivered_at < now() - $2 * interval '1 second' ORDER BY delivered_at LIMIT $3
  )) RETURNING partition
), tallied AS (${tally(tallies, 'pruned', '0, 0, -count(*)')})
SELECT count(*)::int AS pruned FROM pruned`,
      values: [outbox, olderThanSeconds, limit],
    },
  ];
}

export const postgresDialect: Dialect = Object.freeze({
  name: 'postgres' as const,
  capabilities: Object.freeze({
    notifications: true,
    advisoryLocks: true,
    concurrentWriters: true,
    pollCursor: true,
    rejectsNulCharacters: true,
  }),
  schema: postgresSchema,
  // Concurrent migrate() calls queue on one transaction-scoped advisory lock.
  migrationLock: () => [
    // Wrapped so the statement returns an ordinary column: some clients (Prisma) cannot read `void`.
    {
      text: `SELECT 1 AS locked FROM (SELECT pg_advisory_xact_lock(hashtextextended('outboxer:migrate', 0))) AS l`,
      values: [],
    },
  ],
  insert,
  poll,
  countRewind,
  hold,
  nextRetryAt,
  settle,
  acknowledgeAndPoll,
  acquireLease,
  renewLease,
  releaseLease,
  heartbeat,
  removeNode,
  counts,
  tallies: Object.freeze({ compact: compactTallies, recount }),
  readConfiguration,
  writeConfiguration,
  serverVersion: () => ({ text: `SELECT current_setting('server_version_num')::int AS version`, values: [] }),
  // pg_current_snapshot() and xid8 (where a poll starts) need 13.
  minimumVersion: { number: 130000, name: 'PostgreSQL 13' },
  list,
  retryDead,
  discard,
  releaseOrphanedHolds: (table: QualifiedName, outbox: string, parkDead: boolean) =>
    unhold(quoteName(table), outbox, undefined, parkDead),
  blockedGroups,
  prune,
  toEnvelope: readEnvelope,
  missingSchemaObject: (message: string) =>
    /column ("[^"]+" of relation "[^"]+") does not exist/.exec(message)?.[1] ??
    /relation ("[^"]+") does not exist/.exec(message)?.[1],
});
