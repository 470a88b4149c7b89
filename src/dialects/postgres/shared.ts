import type { LeaseToken } from '../../core/dialect.js';
import type { Parameters } from '../shared/parameters.js';
import { figures } from './postgres-schema.js';

/**
 * The pieces several statement families share: intervals, the columns a poll or a listing reads,
 * the lease fence every write of a worker carries, and the tallies every change writes with it.
 */

/** Milliseconds as an interval: `${ms} ${MS}`. */
export const MS = `* interval '1 millisecond'`;

/**
 * What a poll or a listing reads. Timestamps travel as Unix milliseconds (float8), which the
 * driver reads as a number, where a timestamptz is formatted as text by the server and parsed back
 * with a regular expression by pg: a few percent of a draining relay's time.
 */
const epochMs = (column: string) => `date_part('epoch', ${column}) * 1000 AS ${column}`;
export const COLUMNS = `id, partition, group_key, type, payload::text AS payload, headers::text AS headers, attempts, last_error, ${epochMs('next_attempt_at')}, ${epochMs('failing_since')}, ${epochMs('inserted_at')}, status`;

/**
 * An array parameter the planner cannot look into: `id = ANY($1)` with a constant array makes the
 * planner estimate every element (milliseconds of planning for a batch of a thousand), while an
 * InitPlan's array is one unknown value. The executor reads it once.
 */
export function opaque(param: string, type: 'bigint'): string {
  // The cast keeps `= ANY(…)` the array form: `= ANY((SELECT …))` would compare with each row.
  return `(SELECT ${param}::${type}[])::${type}[]`;
}

/** The placeholders of a lease token. */
export interface LeasePlaceholders {
  readonly outbox: string;
  readonly partition: string;
  readonly owner: string;
  readonly epoch: string;
}

/** Adds a lease token's values, in the order outbox, partition, owner, epoch. */
export function addLease(p: Parameters, lease: LeaseToken): LeasePlaceholders {
  return {
    outbox: p.add(lease.outbox),
    partition: p.add(lease.partition),
    owner: p.add(lease.owner),
    epoch: p.add(lease.epoch),
  };
}

/** The lease row of the token, as a condition on the columns of `<table>_leases`. */
export function ownsLease($: LeasePlaceholders): string {
  return `outbox = ${$.outbox} AND partition = ${$.partition} AND owner = ${$.owner} AND epoch = ${$.epoch}`;
}

/** `true` when the lease still belongs to the worker. */
export function fence(leases: string, $: LeasePlaceholders): string {
  return `EXISTS (SELECT 1 FROM ${leases} WHERE ${ownsLease($)})`;
}

/**
 * The change a statement made to the outbox's figures, as one tally row per partition, written
 * by the statement itself (a data-modifying CTE over the rows `changed` returned), so the figures
 * `counts()` sums commit or roll back with the change. No row when nothing changed. Tallies are
 * inserted, never updated: publishers take no lock a counter row would serialise them on.
 * `change` gives pending, dead, delivered as aggregates over `changed` (column `partition`, and
 * `status` where `change` reads it), for the outbox of placeholder `outbox`.
 */
export function tally(tallies: string, outbox: string, changed: string, change: string): string {
  return `INSERT INTO ${tallies} (outbox, partition, pending, dead, delivered) SELECT ${outbox}, partition, ${change} FROM ${changed} GROUP BY partition`;
}

/**
 * A worker's tally of the rows it settled (`changed`, with column `status`), those matching
 * `where`: all in its own partition, which it polled them from. A plain aggregate, not a grouping
 * one: this runs with every batch.
 */
export function workerTally(
  tallies: string,
  $: Pick<LeasePlaceholders, 'outbox' | 'partition'>,
  changed: string,
  change: string,
  where = '',
): string {
  return `INSERT INTO ${tallies} (outbox, partition, pending, dead, delivered) SELECT ${$.outbox}, ${$.partition}, ${change} FROM ${changed}${where} HAVING count(*) > 0`;
}

/** Rows removed, by the status they had. */
export const REMOVED = figures('-');
/** Pending rows that were delivered and kept. */
export const KEPT = '-count(*), 0, count(*)';
