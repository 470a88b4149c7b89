/**
 * What the adapter behaviour tests share (behaviour.ts runs them): the target a suite opens
 * (Postgres schema, MariaDB database or SQLite file) with a raw connection beside it, fresh tables
 * and manual outboxers, and small helpers for sync and async adapters.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import {
  Outboxer,
  functionRelay,
  type DatabaseAdapter,
  type Envelope,
  type OutboxOptions,
  type SqlQuery,
} from 'outboxer';
import { DATABASE_URL, mariadbFixture, postgresFixture } from '../support/databases.js';
import type { AdapterHarness, Opened, Target } from './behaviour.js';

/** Checks on the tables behind the adapter's back, through a separate connection. */
export interface Raw {
  count(table: string): Promise<number>;
  query(text: string, values?: unknown[]): Promise<Record<string, unknown>[]>;
  close(): Promise<void>;
}

export class Rollback extends Error {}

/** Continues after a value that is a promise on async adapters and a plain value on sync ones. */
export function andThen<T, U>(value: T | Promise<T>, fn: (value: T) => U): U | Promise<U> {
  return value instanceof Promise ? value.then(fn) : fn(value);
}

/** The adapter with every executeInTransaction recorded. */
export function recording<Tx>(database: DatabaseAdapter<Tx, boolean>) {
  const statements: SqlQuery[] = [];
  const wrapped: DatabaseAdapter<Tx, boolean> = {
    ...database,
    executeInTransaction(tx, query) {
      statements.push(query);
      return database.executeInTransaction(tx, query);
    },
  };
  return { statements, database: wrapped };
}

/** A payload with what quoting, placeholders and JSON get wrong. */
export const awkward = {
  text: `it's "quoted", a ? and $1, a \\ backslash, {braces}, NULL, ü €`,
  nested: { list: [1, null, 'two'], empty: {} },
  big: 12345678901234,
};

/**
 * Opens what the suite runs on for `dialect`: a fresh Postgres schema (with a URL that sets it as the
 * search path), a fresh MariaDB database or a fresh SQLite file, and a raw connection beside it.
 */
export async function openTarget(
  dialect: AdapterHarness<unknown>['dialect'],
): Promise<{ target: Target; raw: Raw }> {
  let target: Target;
  let raw: Raw;
  if (dialect === 'postgres') {
    const fixture = await postgresFixture(4);
    const schema = fixture.schema;
    const url = DATABASE_URL;
    const separator = url.includes('?') ? '&' : '?';
    target = {
      kind: 'postgres',
      url,
      schema,
      urlWithSchema: `${url}${separator}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
    };
    raw = {
      count: async (t) =>
        Number((await fixture.query(`SELECT count(*)::int AS n FROM "${schema}"."${t}"`))[0]!.n),
      query: (text, values) => fixture.query(text, values),
      close: () => fixture.close(),
    };
  } else if (dialect === 'mysql') {
    const fixture = await mariadbFixture(4);
    target = { kind: 'mysql', url: fixture.url, database: fixture.schema };
    raw = {
      count: async (t) => Number((await fixture.query(`SELECT count(*) AS n FROM "${t}"`))[0]!.n),
      query: (text, values) => fixture.query(text, values),
      close: () => fixture.close(),
    };
  } else {
    const dir = mkdtempSync(join(tmpdir(), 'outboxer-adapter-'));
    const file = join(dir, 'test.db');
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    target = { kind: 'sqlite', file };
    raw = {
      count: async (t) => Number((db.prepare(`SELECT count(*) AS n FROM "${t}"`).get() as { n: number }).n),
      query: async (text, values = []) => db.prepare(text).all(...values) as Record<string, unknown>[],
      close: async () => {
        db.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  return { target, raw };
}

/** Fresh tables, outboxers in manual testing mode, and a relay that collects what it receives. */
export function suiteHelpers<Tx>(opened: () => Opened<Tx>) {
  let tables = 0;
  const table = () => `t${++tables}`;

  async function manual(
    options: Partial<OutboxOptions> & { relay: OutboxOptions['relay'] },
    database = opened().database,
  ) {
    const outboxer = new Outboxer({
      database,
      outboxes: { events: { table: table(), ...options } },
      testing: 'manual',
    });
    await outboxer.migrate();
    return outboxer;
  }

  const collect = () => {
    const delivered: Envelope[] = [];
    return { delivered, relay: functionRelay(async (m: Envelope) => void delivered.push(m)) };
  };

  return { table, manual, collect };
}

/** What the behaviour tests share: the harness, the opened library and target (once beforeAll ran), helpers. */
export interface BehaviourSuite<Tx> extends SuiteHelpers<Tx> {
  readonly harness: AdapterHarness<Tx>;
  readonly target: Target;
  readonly raw: Raw;
  readonly opened: Opened<Tx>;
}

type SuiteHelpers<Tx> = ReturnType<typeof suiteHelpers<Tx>>;
