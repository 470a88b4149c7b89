/**
 * The few parts of a `PgBoss` instance (pg-boss 10) the relay uses, described structurally so
 * that `outboxer/pg-boss` imports nothing from `pg-boss` when it is loaded.
 */

/**
 * Options of one job, as pg-boss's `insert` takes them. Every one is optional; the queue's own
 * settings (from `createQueue`) apply otherwise. `priority` reorders jobs, and `startAfter` holds
 * them back: fine with `ordering: 'none'`, or when every job gets the same value.
 *
 * @example
 * pgBossRelay({ boss, queue: 'orders', jobOptions: { retryLimit: 0, expireInSeconds: 300 } });
 */
export interface PgBossJobOptions {
  priority?: number;
  retryLimit?: number;
  retryDelay?: number;
  retryBackoff?: boolean;
  startAfter?: Date | string;
  expireInSeconds?: number;
  keepUntil?: Date | string;
  deadLetter?: string;
}

/** One job of an `insert` call, as the relay builds it (pg-boss's `JobInsert`). */
export interface PgBossJobInsert extends PgBossJobOptions {
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
 * The part of a `PgBoss` instance the relay calls. Pass your own, started instance; the relay
 * never starts or stops it (start it before `outboxer.start()`, stop it after `outboxer.stop()`).
 *
 * - `insert(jobs)`: one call per batch, a single `INSERT ... ON CONFLICT DO NOTHING`.
 * - `getQueue(name)`: pg-boss 10 silently drops jobs for a queue that does not exist, so the relay
 *   checks the queue at `start()` and before each batch.
 *
 * @example
 * import PgBoss from 'pg-boss';
 * const boss: PgBossLike = new PgBoss(process.env.DATABASE_URL!);
 */
export interface PgBossLike {
  // Method syntax on purpose: PgBoss's overloaded `insert` is assignable to it.
  insert(jobs: PgBossJobInsert[]): Promise<unknown>;
  getQueue(name: string): Promise<PgBossQueueInfo | null>;
}
