/**
 * The few parts of a `PgBoss` instance the relay uses, described structurally so that
 * `outboxer/pg-boss` imports nothing from `pg-boss` when it is loaded. pg-boss 11 changed
 * `insert(jobs)` (each job naming its queue) to `insert(name, jobs)`: {@link PgBossLike} is the
 * shape of 11 and 12, {@link PgBoss10Like} the shape of 10.
 */

/**
 * Options of one job, as pg-boss's `insert` takes them. Every one is optional; the queue's own
 * settings (from `createQueue`) apply otherwise. Not every line reads every option: the relay
 * accepts, for pg-boss 11 and 12, all but `keepUntil`, and for pg-boss 10 only `priority`,
 * `retryLimit`, `retryDelay`, `retryBackoff`, `startAfter`, `expireInSeconds`, `keepUntil` and
 * `deadLetter` (pg-boss 11 ignores `heartbeatSeconds` and `deadLetter`, which came in 12).
 * `priority` and `startAfter` change the order: see docs/relays/pg-boss.md.
 *
 * @example
 * pgBossRelay({ boss, queue: 'orders', jobOptions: { retryLimit: 3, expireInSeconds: 300 } });
 */
export interface PgBossJobOptions {
  priority?: number;
  retryLimit?: number;
  retryDelay?: number;
  retryBackoff?: boolean;
  /** pg-boss 11 and 12. */
  retryDelayMax?: number;
  startAfter?: Date | string | number;
  expireInSeconds?: number;
  /** pg-boss 11 and 12. */
  deleteAfterSeconds?: number;
  /** pg-boss 11 and 12. */
  retentionSeconds?: number;
  /** pg-boss 12. */
  heartbeatSeconds?: number;
  /** pg-boss 10 only (11 replaced it with `retentionSeconds`). */
  keepUntil?: Date | string;
  /** pg-boss 10 and 12. */
  deadLetter?: string;
}

/** A pg-boss 12 concurrency group: the job option `group`, read by the worker's `groupConcurrency`. */
export interface PgBossGroup {
  id: string;
  tier?: string;
}

/** One job of an `insert(name, jobs)` call (pg-boss 11 and 12), as the relay builds it. */
export interface PgBossJobInsert extends PgBossJobOptions {
  id?: string;
  data?: object;
  /** Set by the relay on a `key_strict_fifo` queue only: the key whose jobs run one after another. */
  singletonKey?: string;
  /** pg-boss 12 (11 ignores it). */
  group?: PgBossGroup;
}

/** One job of a pg-boss 10 `insert(jobs)` call: the same, naming its queue. */
export interface PgBoss10JobInsert extends PgBossJobOptions {
  id?: string;
  name: string;
  data?: object;
}

/** What the relay reads of a queue (`getQueue` result). */
export interface PgBossQueueInfo {
  readonly name: string;
  readonly policy?: string | null;
}

/**
 * The part of a pg-boss 12 or 11 `PgBoss` instance the relay calls. Pass your own, started
 * instance; the relay never starts or stops it (start it before `outboxer.start()`, stop it after
 * `outboxer.stop()`).
 *
 * - `insert(name, jobs)`: one call per queue of a batch, a single `INSERT ... ON CONFLICT DO NOTHING`.
 * - `getQueue(name)`: checked at `start()` and before each batch: a queue whose policy drops jobs
 *   is refused, and a `key_strict_fifo` queue gets a `singletonKey` on every job.
 *
 * @example
 * import { PgBoss } from 'pg-boss';
 * const boss: PgBossLike = new PgBoss(process.env.DATABASE_URL!);
 */
export interface PgBossLike {
  // Method syntax on purpose: PgBoss's own `insert` (overloaded in 11) is assignable to it.
  insert(name: string, jobs: PgBossJobInsert[]): Promise<unknown>;
  getQueue(name: string): Promise<PgBossQueueInfo | null>;
}

/**
 * The part of a pg-boss 10 `PgBoss` instance the relay calls: `insert(jobs)` and `getQueue(name)`
 * as in {@link PgBossLike}, and `getQueueSize`, which pg-boss 11 removed: its presence is how the
 * relay tells a pg-boss 10 instance from a later one.
 *
 * @example
 * import PgBoss from 'pg-boss'; // pg-boss 10
 * const boss: PgBoss10Like = new PgBoss(process.env.DATABASE_URL!);
 */
export interface PgBoss10Like {
  insert(jobs: PgBoss10JobInsert[]): Promise<unknown>;
  getQueue(name: string): Promise<PgBossQueueInfo | null>;
  getQueueSize(name: string): Promise<number>;
}

/** True for a pg-boss 10 instance (see {@link PgBoss10Like}). */
export function isPgBoss10(boss: PgBossLike | PgBoss10Like): boss is PgBoss10Like {
  return typeof (boss as Partial<PgBoss10Like>).getQueueSize === 'function';
}
