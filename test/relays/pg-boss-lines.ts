/**
 * The pg-boss lines the relay supports, side by side: pg-boss 12 (the `pg-boss` devDependency),
 * 11 and 10 (the `pg-boss-v11` and `pg-boss-v10` aliases). Each line's `PgBoss` behind one small
 * interface, so that one test file runs against all three; the relay itself gets `raw`.
 */
import { PgBoss as PgBoss12 } from 'pg-boss';
import PgBoss11 from 'pg-boss-v11';
import PgBoss10 from 'pg-boss-v10';
import type { PgBoss10Like, PgBossLike } from 'outboxer/pg-boss';

export const DATABASE_URL =
  process.env.OUTBOXER_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface BossOptions {
  connectionString: string;
  schema: string;
  max?: number;
  migrate?: boolean;
  supervise?: boolean;
}

export interface QueueOptions {
  policy?: string;
  retryLimit?: number;
  retryDelay?: number;
}

/** A job as `fetch` returns it, with the metadata the tests read. */
export interface FetchedJob<T = unknown> {
  id: string;
  data: T;
  createdOn: Date;
  retryCount: number;
  retryLimit: number;
  singletonKey: string | null;
  /** pg-boss 12 only. */
  groupId?: string | null;
}

/** The calls the tests make, the same on every line. */
export interface Boss {
  /** The PgBoss instance itself, for the relay. */
  readonly raw: PgBossLike | PgBoss10Like;
  start(): Promise<void>;
  stop(): Promise<void>;
  createQueue(name: string, options?: QueueOptions): Promise<void>;
  /** Inserts jobs with pg-boss's own ids (no id given): the control of the order tests. */
  insertPlain(queue: string, jobs: Array<{ data: object; singletonKey?: string }>): Promise<void>;
  fetch<T>(queue: string, batchSize?: number): Promise<Array<FetchedJob<T>>>;
  complete(queue: string, ids: string[]): Promise<void>;
  getJob<T>(queue: string, id: string): Promise<FetchedJob<T> | null>;
  deleteJob(queue: string, id: string): Promise<void>;
  /** Jobs of the queue in the job table, whatever their state. */
  count(queue: string): Promise<number>;
  sql(text: string, values?: unknown[]): Promise<Array<Record<string, unknown>>>;
}

export interface Line {
  readonly name: string;
  readonly major: 10 | 11 | 12;
  /** Queue policies that keep one queued job and drop the rest (refused by the relay). */
  readonly droppingPolicies: readonly string[];
  /** A PgBoss of this line, not started; errors it emits are ignored. */
  create(options: BossOptions): Boss;
}

/** The methods the three classes share, as the tests call them (their own types differ per line). */
interface Common {
  start(): Promise<unknown>;
  stop(options: { graceful: boolean }): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  createQueue(name: string, options: object): Promise<void>;
  fetch(queue: string, options: object): Promise<Array<FetchedJob<unknown>>>;
  complete(queue: string, ids: string[]): Promise<unknown>;
  getJobById(queue: string, id: string): Promise<FetchedJob<unknown> | null>;
  deleteJob(queue: string, id: string): Promise<unknown>;
  getDb(): { executeSql(text: string, values: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }> };
}

function wrap(major: 10 | 11 | 12, instance: object, schema: string): Boss {
  const boss = instance as Common;
  boss.on('error', () => undefined); // connection errors during outages are expected
  const sql = async (text: string, values: unknown[] = []) =>
    (await boss.getDb().executeSql(text, values)).rows;
  return {
    raw: instance as PgBossLike | PgBoss10Like,
    start: async () => void (await boss.start()),
    stop: () => boss.stop({ graceful: false }),
    // pg-boss 10 wants the name in the options too.
    createQueue: (name, options = {}) =>
      boss.createQueue(name, major === 10 ? { name, ...options } : options),
    async insertPlain(queue, jobs) {
      if (major === 10) await (instance as PgBoss10Like).insert(jobs.map((job) => ({ name: queue, ...job })));
      else await (instance as PgBossLike).insert(queue, jobs);
    },
    fetch: <T>(queue: string, batchSize = 1) =>
      boss.fetch(queue, { batchSize, includeMetadata: true }) as Promise<Array<FetchedJob<T>>>,
    complete: async (queue, ids) => void (await boss.complete(queue, ids)),
    getJob: <T>(queue: string, id: string) => boss.getJobById(queue, id) as Promise<FetchedJob<T> | null>,
    deleteJob: async (queue, id) => void (await boss.deleteJob(queue, id)),
    async count(queue) {
      const rows = await sql(`SELECT count(*)::int AS n FROM ${schema}.job WHERE name = $1`, [queue]);
      return rows[0]!.n as number;
    },
    sql,
  };
}

function constructorOptions(options: BossOptions): Record<string, unknown> {
  return { supervise: false, schedule: false, max: 3, ...options };
}

export const lines: readonly Line[] = [
  {
    name: 'pg-boss 12',
    major: 12,
    droppingPolicies: ['short', 'stately', 'exclusive'],
    create: (options) => wrap(12, new PgBoss12(constructorOptions(options)), options.schema),
  },
  {
    name: 'pg-boss 11',
    major: 11,
    droppingPolicies: ['short', 'stately', 'exclusive'],
    create: (options) => wrap(11, new PgBoss11(constructorOptions(options)), options.schema),
  },
  {
    name: 'pg-boss 10',
    major: 10,
    droppingPolicies: ['short', 'stately'],
    create: (options) => wrap(10, new PgBoss10(constructorOptions(options)), options.schema),
  },
];
