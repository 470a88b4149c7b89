/**
 * The inbox suites' one way to receive a message: handle it in a transaction of the fixture whose
 * effect inserts a row into `effects`, then commit (or fail, swallow the failure, roll back).
 */
import type Database from 'better-sqlite3';
import type { InboxMessage, InboxOrder, InboxOutcome, Outboxer } from 'outboxer';
import type { Fixture } from './databases.js';

export type AnyOutboxer = Outboxer<never, boolean>;

export interface ReceiveOptions {
  inbox?: string;
  /** The handler throws after its insert. */
  fail?: boolean;
  /** The caller catches the handler's error and commits the rest of its transaction. */
  swallow?: boolean;
  /** The caller rolls its transaction back after `handle` returned. */
  rollback?: boolean;
  /** Called with what the handler is given. */
  onOrder?: (order: InboxOrder) => void;
}

/** Handles `message` in a transaction whose effect inserts `effect` into `effects`; commits. */
export async function receive(
  fixture: Fixture,
  outboxer: AnyOutboxer,
  message: InboxMessage,
  effect: string,
  options: ReceiveOptions = {},
): Promise<InboxOutcome<string>> {
  const inbox = outboxer.inbox(options.inbox ?? 'payments');
  let outcome: InboxOutcome<string> | undefined;
  const rollback = new Error('rolled back by the caller');
  try {
    if (fixture.kind === 'sqlite') {
      await fixture.transaction((db: Database.Database) => {
        const handle = () =>
          (outcome = inbox.handle(db as never, message, (order) => {
            options.onOrder?.(order);
            db.prepare('INSERT INTO effects (effect) VALUES (?)').run(effect);
            if (options.fail) throw new Error('handler failed');
            return effect;
          }) as unknown as InboxOutcome<string>);
        if (options.swallow) {
          try {
            handle();
          } catch {
            // The caller goes on with its transaction and commits.
          }
        } else handle();
        if (options.rollback) throw rollback;
      });
    } else {
      // pg's client and mysql2's connection both take query(text, values).
      const transaction = fixture.transaction as (
        fn: (client: { query(text: string, values: unknown[]): Promise<unknown> }) => Promise<void>,
      ) => Promise<void>;
      const insert = `INSERT INTO effects (effect) VALUES (${fixture.kind === 'mysql' ? '?' : '$1'})`;
      await transaction(async (client) => {
        const handle = async () =>
          (outcome = await (inbox.handle(client as never, message, async (order) => {
            options.onOrder?.(order);
            await client.query(insert, [effect]);
            if (options.fail) throw new Error('handler failed');
            return effect;
          }) as unknown as Promise<InboxOutcome<string>>));
        if (options.swallow) await handle().catch(() => undefined);
        else await handle();
        if (options.rollback) throw rollback;
      });
    }
  } catch (error) {
    if (error !== rollback) throw error;
  }
  return outcome!;
}
