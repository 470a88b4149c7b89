/**
 * The store-then-process suites' ways to reach each database: a `process` option whose handler
 * inserts an effect row with the fixture's own transactions (synchronous on better-sqlite3), and
 * `store` inside a transaction of the fixture that commits or rolls back.
 */
import type { InboxOrder, StoredMessage, StoreMessage, StoreOutcome } from 'outboxer';
import type { EngineFixture as Fixture } from './databases.js';
import type { AnyOutboxer } from './inbox.js';

/** One effect row: which inbox's handler wrote it, the message's group and position, and `n`. */
export const EFFECTS_TABLE = `CREATE TABLE store_effects (
  inbox VARCHAR(100) NOT NULL, group_key VARCHAR(100) NULL, seq INT NOT NULL, n INT NOT NULL)`;

/** What the handler does after writing its effect: throw (rolls the effect back) or go on. */
export type Verdict = (message: StoredMessage, order: InboxOrder) => Error | undefined;

/**
 * The `transaction` and `handler` of a `process` option on the fixture's database. The handler
 * inserts (inbox, group key, payload's seq, n) into store_effects, `n` counting calls in this
 * process: within a group, processing is sequential, so `n` orders a group's effects as they were
 * made. `verdict` may make it throw after its insert.
 */
export function processOn(
  fixture: Fixture,
  inbox: string,
  verdict: Verdict = () => undefined,
  runner?: (work: (tx: unknown) => unknown) => unknown,
): { transaction: never; handler: never } {
  let n = 0;
  const text = `INSERT INTO store_effects (inbox, group_key, seq, n) VALUES (${placeholders(fixture, 4)})`;
  const values = (message: StoredMessage) => [
    inbox,
    message.groupKey,
    (message.payload as { seq: number }).seq,
    ++n,
  ];
  if (fixture.kind === 'sqlite') {
    return {
      transaction: (runner ?? runnerOf(fixture)) as never,
      handler: ((message: StoredMessage, tx: SqliteDatabase, order: InboxOrder) => {
        tx.prepare(text).run(...(values(message) as never[]));
        const error = verdict(message, order);
        if (error) throw error;
      }) as never,
    };
  }
  const transaction = fixture.transaction as (work: (tx: unknown) => Promise<unknown>) => Promise<unknown>;
  return {
    transaction: (runner ?? transaction) as never,
    handler: (async (message: StoredMessage, tx: Queryable, order: InboxOrder) => {
      await tx.query(text, values(message));
      const error = verdict(message, order);
      if (error) throw error;
    }) as never,
  };
}

/** The fixture's own transaction runner, for a test that wraps it. */
export function runnerOf(fixture: Fixture): (work: (tx: unknown) => unknown) => unknown {
  if (fixture.kind !== 'sqlite') return fixture.transaction as (work: (tx: unknown) => unknown) => unknown;
  const db = fixture.db as unknown as SqliteDatabase;
  // better-sqlite3's own transaction function; node:sqlite's BEGIN … COMMIT around the work.
  if (db.transaction !== undefined) return (work) => db.transaction!(() => work(db))();
  return (work) => {
    db.exec('BEGIN');
    try {
      const value = work(db);
      db.exec('COMMIT');
      return value;
    } catch (error) {
      if (db.isTransaction) db.exec('ROLLBACK');
      throw error;
    }
  };
}

/** What the suites use of a better-sqlite3 or node:sqlite database. */
interface SqliteDatabase {
  prepare(text: string): { run(...values: never[]): unknown };
  exec(text: string): unknown;
  transaction?: (fn: () => unknown) => () => unknown;
  readonly isTransaction?: boolean;
}

interface Queryable {
  query(text: string, values: unknown[]): Promise<unknown>;
}

class Rollback extends Error {}

/** Stores `messages` in one transaction of the fixture (rolled back with `rollback`). */
export async function storeAll(
  fixture: Fixture,
  outboxer: AnyOutboxer,
  inbox: string,
  messages: readonly StoreMessage[],
  options: { rollback?: boolean } = {},
): Promise<StoreOutcome[]> {
  const outcomes: StoreOutcome[] = [];
  const target = outboxer.inbox(inbox);
  try {
    if (fixture.kind === 'sqlite') {
      await (fixture.transaction as (work: (db: unknown) => void) => Promise<void>)((db) => {
        for (const message of messages) outcomes.push(target.store(db as never, message) as StoreOutcome);
        if (options.rollback) throw new Rollback();
      });
    } else {
      const transaction = fixture.transaction as (work: (tx: unknown) => Promise<void>) => Promise<void>;
      await transaction(async (tx) => {
        for (const message of messages) outcomes.push(await target.store(tx as never, message));
        if (options.rollback) throw new Rollback();
      });
    }
  } catch (error) {
    if (!(error instanceof Rollback)) throw error;
  }
  return outcomes;
}

/** The effects of `inbox`'s handler: each group's positions in the order they were made. */
export async function effectsOf(fixture: Fixture, inbox: string): Promise<Record<string, number[]>> {
  const rows = await fixture.query(
    `SELECT group_key, seq FROM store_effects WHERE inbox = ${placeholders(fixture, 1)} ORDER BY n`,
    [inbox],
  );
  const groups: Record<string, number[]> = {};
  for (const row of rows) (groups[String(row.group_key)] ??= []).push(Number(row.seq));
  return groups;
}

function placeholders(fixture: Fixture, count: number): string {
  return Array.from({ length: count }, (_, i) => (fixture.kind === 'postgres' ? `$${i + 1}` : '?')).join(
    ', ',
  );
}
