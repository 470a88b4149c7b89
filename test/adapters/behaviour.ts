/**
 * The behaviour suite of the data-layer adapters: every adapter runs it against a real database
 * (Postgres; SQLite as well where the library supports it). It publishes inside the library's own
 * transactions and checks what the relay side then sees, so both halves of an adapter (the
 * user's transaction and the adapter's own connection) are exercised together.
 *
 * An adapter's test file calls {@link adapterBehaviour} with a harness that opens the library on
 * the database the suite hands it (a fresh Postgres schema, or a fresh SQLite file). The tests
 * live in behaviour-delivery.ts and behaviour-transactions.ts, what they share in
 * behaviour-suite.ts.
 */
import { afterAll, beforeAll, describe } from 'vitest';
import type { DatabaseAdapter } from 'outboxer';
import { openTarget, suiteHelpers, type BehaviourSuite, type Raw } from './behaviour-suite.js';
import { deliveryBehaviour } from './behaviour-delivery.js';
import { transactionBehaviour } from './behaviour-transactions.js';

/** Where the harness opens its library: a Postgres schema (set it as the search path) or a SQLite file. */
export type Target =
  | {
      readonly kind: 'postgres';
      readonly url: string;
      readonly schema: string;
      readonly urlWithSchema: string;
    }
  | { readonly kind: 'sqlite'; readonly file: string }
  /** A fresh MariaDB database (`url` names it). */
  | { readonly kind: 'mysql'; readonly url: string; readonly database: string };

/** The library opened on the target, and an adapter over it. */
export interface Opened<Tx> {
  readonly database: DatabaseAdapter<Tx, boolean>;
  /**
   * Runs `fn` in a transaction of the library and commits; when `fn` throws (or rejects), the
   * library rolls back and the error comes out. For a synchronous library `fn` is synchronous.
   */
  transaction<T>(fn: (tx: Tx) => T | Promise<T>): Promise<T>;
  /** Runs `fn` in a transaction, then rolls it back with the library's own rollback API. */
  rollback(fn: (tx: Tx) => unknown): Promise<void>;
  /** Objects of the library that are not an open transaction (the root client, …): publish must refuse them. */
  readonly notTransactions: () => Record<string, unknown>;
  close(): Promise<void>;
}

export interface AdapterHarness<Tx> {
  readonly name: string;
  readonly dialect: 'postgres' | 'sqlite' | 'mysql';
  /** True when publish returns the id synchronously (better-sqlite3, Drizzle on better-sqlite3). */
  readonly sync: boolean;
  open(target: Target): Promise<Opened<Tx>>;
}

export function adapterBehaviour<Tx>(harness: AdapterHarness<Tx>): void {
  describe(`${harness.name} adapter behaviour`, () => {
    let target: Target;
    let raw: Raw;
    let opened: Opened<Tx>;

    beforeAll(async () => {
      ({ target, raw } = await openTarget(harness.dialect));
      opened = await harness.open(target);
    });

    afterAll(async () => {
      await opened?.close();
      await raw?.close();
    });

    const suite: BehaviourSuite<Tx> = {
      harness,
      get target() {
        return target;
      },
      get raw() {
        return raw;
      },
      get opened() {
        return opened;
      },
      ...suiteHelpers(() => opened),
    };
    deliveryBehaviour(suite);
    transactionBehaviour(suite);
  });
}
