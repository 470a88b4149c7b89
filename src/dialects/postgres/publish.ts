import type { InsertOptions, InsertRow } from '../../core/dialect.js';
import type { QualifiedName } from '../../core/identifiers.js';
import type { Statement } from '../../core/sql.js';
import { Parameters } from '../shared/parameters.js';
import { tables } from './tables.js';

/**
 * Publishing: the INSERT a publisher runs in its own transaction, with its tally.
 *
 * Locking: the rows take no lock anyone waits on (tallies are inserted, never updated). With
 * `serializeWrites`, a transaction-scoped advisory lock per group key, taken in sorted key order
 * so that two publishers of overlapping groups cannot deadlock. With `notify`, the advisory locks
 * of {@link coalescedNotify}: `publishing`, shared, held by every publishing transaction until it
 * ends, and `notifying`, held by the one that will send the payload. Locks and notifications come
 * before the rows get their ids, and the transaction gets its id before both (see `startCtes` in
 * poll.ts).
 */

/** The ids of the inserted rows, ascending (the order of `rows`). */
export function insert(
  table: QualifiedName,
  rows: readonly InsertRow[],
  options: InsertOptions,
): Statement<number[]> {
  const { messages: t, tallies } = tables(table);
  const p = Parameters.numbered();
  const columns = `(outbox, partition, group_key, type, payload, headers)`;
  // One row: plain parameters. Many: one parameter per column, unnested in the order given
  // (ORDER BY ord: ids are drawn in that order).
  const single = rows.length === 1;
  const select = single
    ? (() => {
        const r = rows[0]!;
        return `SELECT ${p.add(r.outbox)}, ${p.add(r.partition)}::int, ${p.add(r.groupKey)}, ${p.add(r.type)}, ${p.add(r.payload)}::json, ${p.add(r.headers)}::json`;
      })()
    : `SELECT r.outbox, r.partition, r.group_key, r.type, r.payload, r.headers`;
  const sources = single
    ? []
    : [
        `unnest(${p.add(rows.map((r) => r.outbox))}::text[], ${p.add(rows.map((r) => r.partition))}::int[], ${p.add(rows.map((r) => r.groupKey))}::text[], ${p.add(rows.map((r) => r.type))}::text[], ${p.add(rows.map((r) => r.payload))}::json[], ${p.add(rows.map((r) => r.headers))}::json[]) WITH ORDINALITY AS r(outbox, partition, group_key, type, payload, headers, ord)`,
      ];
  const lockKeys = options.serialize ? distinctSorted(rows.map((row) => row.groupKey)) : [];
  if (lockKeys.length === 1) {
    sources.push(`(SELECT pg_advisory_xact_lock(hashtextextended(${p.add(lockKeys[0])}, 0))) AS serialized`);
  } else if (lockKeys.length > 1) {
    // Sorted keys: two publishers of overlapping groups lock in the same order and cannot deadlock.
    sources.push(
      `(SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) FROM unnest(${p.add(lockKeys)}::text[]) AS k) AS serialized`,
    );
  }
  if (options.notify !== undefined) {
    // Postgres folds identical notifications of one transaction: one per partition reaches relays.
    const { channel, payloads } = options.notify;
    const ch = p.add(channel);
    sources.push(
      payloads.length === 1
        ? `(SELECT ${coalescedNotify(ch, p.add(payloads[0]), t)}) AS notified`
        : `(SELECT count(${coalescedNotify(ch, 'p', t)}) FROM unnest(${p.add(payloads)}::text[]) AS p) AS notified`,
    );
  }
  // The transaction gets its id before the rows get theirs, so a poll that sees a larger id
  // committed sees this transaction in flight (or ended): see startCtes.
  sources.push(`(SELECT 1 WHERE pg_current_xact_id() IS NOT NULL) AS xact`);
  // The locks and notifications sit in FROM, so they run before the row gets its id.
  const from = sources.length === 0 ? '' : ` FROM ${sources.join(', ')}`;
  const order = single ? '' : ' ORDER BY r.ord';
  // Prepared: a publish is one short statement, whose parsing and planning cost the server as much
  // as its execution (with many writers, unprepared it publishes noticeably slower than a plain
  // INSERT; prepared, as fast).
  // One tally per outbox and partition published to (one row: no grouping).
  const tallied = single
    ? `SELECT outbox, partition, 1, 0, 0 FROM inserted`
    : `SELECT outbox, partition, count(*), 0, 0 FROM inserted GROUP BY outbox, partition`;
  const text = `WITH inserted AS (INSERT INTO ${t} ${columns} ${select}${from}${order} RETURNING id, outbox, partition),
tallied AS (INSERT INTO ${tallies} (outbox, partition, pending, dead, delivered) ${tallied})
SELECT id FROM inserted`;
  return p.statement(
    single ? oneRowText(table, lockKeys.length * 2 + (options.notify === undefined ? 0 : 1), text) : text,
    (inserted) => inserted.map((row) => Number(row.id)).sort((a, b) => a - b),
    true,
  );
}

/**
 * The text of a one-row publish, the same string each time for its table and variant (serialized,
 * notifying; the caller still builds it, for the values it adds, and only the first is kept): the
 * adapter finds its prepared statement by the text, and a string it has seen
 * before is looked up without reading its 600 characters again (with the quoted names of
 * tables.ts, a third of a publish's own CPU: docs/benchmarks.md, "Figures behind decisions").
 */
function oneRowText(table: QualifiedName, variant: number, text: string): string {
  let variants = oneRowTexts.get(table);
  if (variants === undefined) oneRowTexts.set(table, (variants = new Map()));
  const known = variants.get(variant);
  if (known !== undefined) return known;
  variants.set(variant, text);
  return text;
}

const oneRowTexts = new WeakMap<QualifiedName, Map<number, string>>();

/**
 * The advisory lock keys of a notify payload: `publishing`, held shared by every transaction that
 * publishes with it until it ends, and `notifying`, held by the one that will send it. Seeded with
 * the message table's OID (`messages` is its quoted name): advisory locks are the database's, and
 * two applications in one database (a schema each, the same instance and outbox names) would
 * otherwise share keys, one's publishers keeping the other's idle workers polling.
 */
export function notifyLock(kind: 'publishing' | 'notifying', payload: string, messages: string): string {
  return `hashtextextended('outboxer ${kind} ' || ${payload}, '${messages}'::regclass::oid::bigint)`;
}

/**
 * NOTIFY, unless another transaction in flight will send the same payload when it commits.
 * Postgres serialises the commits of notifying transactions (one global lock, held through the
 * commit's WAL flush), so writers that all notify lose a large part of their rate; this way one
 * transaction per payload notifies at a time. Every publisher holds `publishing` until it ends, so
 * a relay polls again, rather than waiting for a notification, until a poll finds none in flight
 * (`checkPublishers`); a relay testing `publishing` at that very moment makes the publisher notify
 * anyway. (The transaction id comes first for the late-commit watch: startCtes.)
 */
function coalescedNotify(channel: string, payload: string, messages: string): string {
  return `CASE WHEN pg_current_xact_id() IS NULL THEN NULL
    WHEN NOT pg_try_advisory_xact_lock_shared(${notifyLock('publishing', payload, messages)}) THEN pg_notify(${channel}, ${payload})
    WHEN pg_try_advisory_xact_lock(${notifyLock('notifying', payload, messages)}) THEN pg_notify(${channel}, ${payload}) END`;
}

function distinctSorted(keys: readonly (string | null)[]): string[] {
  const set = new Set<string>();
  for (const key of keys) if (key !== null) set.add(key);
  return [...set].sort();
}
