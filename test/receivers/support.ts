/**
 * What the receiver tests share: a Postgres schema of their own, an `effects` table the handlers
 * write to (one row per handled message, in handling order), a transaction runner over the pool
 * that can be made to fail at commit, and a logger that keeps what it was told.
 */
import pg from 'pg';
import { expect } from 'vitest';
import { Outboxer, type Logger, type PublishInput } from 'outboxer';
import { nodePostgres, type PgTransactionClient } from 'outboxer/pg';
import { postgresFixture } from '../support/databases.js';
import { waitUntil } from '../support/random.js';

export type PostgresFixture = Awaited<ReturnType<typeof postgresFixture>>;

export interface LoggedLine {
  level: keyof Logger;
  message: string;
  context: Record<string, unknown> | undefined;
}

export function recordingLogger(): Logger & { lines: LoggedLine[] } {
  const lines: LoggedLine[] = [];
  const log =
    (level: keyof Logger) =>
    (message: string, context?: Record<string, unknown>): void =>
      void lines.push({ level, message, context });
  return { lines, debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') };
}

/** The consumer side: an instance with one inbox, its table migrated, and the effects table. */
export async function consumerOf(fixture: PostgresFixture, inbox: string) {
  const logger = recordingLogger();
  const outboxer = new Outboxer({ database: nodePostgres(fixture.pool), logger, inboxes: { [inbox]: {} } });
  await outboxer.migrate();
  await fixture.pool.query(
    'CREATE TABLE IF NOT EXISTS effects (seq serial PRIMARY KEY, message_id text NOT NULL, group_key text, payload jsonb)',
  );
  return { outboxer, logger };
}

/**
 * The consumer's transaction runner, as an application writes it for pg: BEGIN, the work, COMMIT,
 * or ROLLBACK when anything throws. `failCommit` makes the next commit fail (after the work ran):
 * what a serialization failure or a lost connection at COMMIT does. `failCommitOf(tx)` makes the
 * commit of that transaction fail, for receivers that run several transactions at once.
 */
export function pgRunner(pool: pg.Pool) {
  const failing = new WeakSet<object>();
  const state = { failCommit: false, commits: 0, failCommitOf: (tx: object) => void failing.add(tx) };
  const transaction = async <T>(work: (tx: pg.PoolClient) => Promise<T>): Promise<T> => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const result = await work(client);
      if (state.failCommit || failing.has(client)) {
        state.failCommit = false;
        failing.delete(client);
        throw new Error('the commit failed');
      }
      await client.query('COMMIT');
      state.commits += 1;
      return result;
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    } finally {
      client.release();
    }
  };
  return Object.assign(state, { transaction });
}

/** Writes the handled message's effect with the receiver's transaction. */
export async function recordEffect(
  tx: PgTransactionClient,
  id: string,
  groupKey: string | null,
  payload: unknown,
): Promise<void> {
  await tx.query('INSERT INTO effects (message_id, group_key, payload) VALUES ($1, $2, $3)', [
    id,
    groupKey,
    JSON.stringify(payload ?? null),
  ]);
}

export async function effects(
  fixture: PostgresFixture,
): Promise<Array<{ message_id: string; group_key: string | null; payload: unknown }>> {
  return (await fixture.pool.query('SELECT message_id, group_key, payload FROM effects ORDER BY seq')).rows;
}

export async function inboxRows(fixture: PostgresFixture): Promise<number> {
  const { rows } = await fixture.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM outboxer_inbox');
  return rows[0]!.n;
}

export async function clear(fixture: PostgresFixture): Promise<void> {
  await fixture.pool.query('TRUNCATE effects, outboxer_inbox, outboxer_inbox_groups');
}

/** `count` messages of the `orders` outbox, spread over `groups` groups (`order:0`, `order:1`…). */
export function orderSteps(count: number, groups: number): PublishInput[] {
  return Array.from({ length: count }, (_, i) => ({
    outbox: 'orders',
    payload: { n: i },
    type: 'order.step',
    groupKey: `order:${i % groups}`,
  }));
}

/** Each published message has exactly one effect, and each group's effects are in publish order. */
export function expectOncePerMessageInGroupOrder(
  rows: ReadonlyArray<{ message_id: string; group_key: string | null }>,
  ids: readonly string[],
  published: readonly PublishInput[],
): void {
  expect(rows.map((r) => r.message_id).sort()).toEqual([...ids].sort());
  for (const key of new Set(published.map((p) => p.groupKey))) {
    const expected = ids.filter((_, i) => published[i]!.groupKey === key);
    expect(
      rows.filter((r) => r.group_key === key).map((r) => r.message_id),
      `the effects of ${key}`,
    ).toEqual(expected);
  }
}

/**
 * The consumer side of `store: true`: an instance whose inbox `name` stores what a receiver gets
 * and processes it later with {@link recordEffect}, in group order, once started.
 */
export async function storingConsumerOf(
  fixture: PostgresFixture,
  runner: ReturnType<typeof pgRunner>,
  name: string,
): Promise<Outboxer<PgTransactionClient>> {
  const outboxer = new Outboxer({
    database: nodePostgres(fixture.pool),
    logger: false,
    inboxes: {
      [name]: {
        process: {
          transaction: runner.transaction,
          handler: (message, tx) => recordEffect(tx, message.id, message.groupKey, message.payload),
          partitions: 2,
          pollInterval: 20,
        },
      },
    },
  });
  await outboxer.migrate();
  return outboxer;
}

/**
 * After a receiver with `store: true` took every message (its broker acknowledged them all):
 * each is stored once and none processed yet; then, started, the inbox processes each message
 * once, in publish order per group unless `inGroupOrder` is false (the inbox keeps the order of
 * storing, and a job queue that retries a job after those behind it stores it late). Closes
 * `stored` at the end.
 */
export async function expectStoredThenProcessed(
  fixture: PostgresFixture,
  stored: Outboxer<PgTransactionClient>,
  inbox: string,
  ids: readonly string[],
  published: readonly PublishInput[],
  inGroupOrder = true,
): Promise<void> {
  expect(await effects(fixture)).toEqual([]);
  expect((await stored.counts(`inbox:${inbox}`)).pending).toBe(ids.length);
  const pending = await stored.listPending(`inbox:${inbox}`, { limit: ids.length + 1 });
  expect(pending.map((m) => (m.payload as { id: string }).id).sort()).toEqual([...ids].sort());
  await stored.start();
  try {
    await waitUntil(async () => (await stored.counts(`inbox:${inbox}`)).pending === 0, 30_000, 'processed');
    const rows = await effects(fixture);
    if (inGroupOrder) expectOncePerMessageInGroupOrder(rows, ids, published);
    else expect(rows.map((r) => r.message_id).sort()).toEqual([...ids].sort());
  } finally {
    await stored.close();
  }
}
