/**
 * What `handle` sends on Postgres: the savepoint, the record (with the group's advance in the same
 * statement when the message is ordered), the release; a duplicate adds the read of when it was
 * handled. Counted on the caller's client, the handler's own writes left out.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, type InboxMessage } from 'outboxer';
import { postgresFixture } from '../support/databases.js';

type PostgresFixture = Awaited<ReturnType<typeof postgresFixture>>;

describe('inbox statements on Postgres', () => {
  let fixture: PostgresFixture;
  let outboxer: Outboxer<pg.PoolClient, false>;
  beforeAll(async () => {
    fixture = await postgresFixture();
    outboxer = new Outboxer({
      database: fixture.database,
      inboxes: { payments: { table: 'statements_inbox' } },
    }) as unknown as Outboxer<pg.PoolClient, false>;
    await outboxer.migrate();
  });
  afterAll(() => fixture.close());

  /** Handles `message` on a client that counts the statements sent through it. */
  async function counted(message: InboxMessage): Promise<{ statements: string[]; outcome: unknown }> {
    const statements: string[] = [];
    const outcome = await fixture.transaction(async (client) => {
      const counting = new Proxy(client, {
        get(target, property, receiver) {
          if (property !== 'query') return Reflect.get(target, property, receiver) as unknown;
          return (text: string | { text: string }, ...rest: unknown[]) => {
            statements.push(typeof text === 'string' ? text : text.text);
            return (target.query as (...args: unknown[]) => unknown)(text, ...rest);
          };
        },
      });
      return outboxer.inbox('payments').handle(counting, message, () => 'done');
    });
    return { statements, outcome };
  }

  test('an ordered message: three statements, the record and its group in one', async () => {
    const first = await counted({ id: 'o-2', source: 'orders', groupKey: 'o', sequence: 2 });
    expect(first.outcome).toEqual({ duplicate: false, value: 'done' });
    expect(first.statements).toHaveLength(3);
    const late = await counted({ id: 'o-1', source: 'orders', groupKey: 'o', sequence: 1 });
    expect(late.outcome).toEqual({ duplicate: false, value: 'done', outOfOrder: true, after: '2' });
    expect(late.statements).toHaveLength(3);
  });

  test('an unordered message: three statements as well', async () => {
    const { outcome, statements } = await counted({ id: 'u-1', source: 'orders' });
    expect(outcome).toEqual({ duplicate: false, value: 'done' });
    expect(statements).toHaveLength(3);
  });

  test("an ordered duplicate leaves its group's highest sequence as it was", async () => {
    await counted({ id: 'd-5', source: 'orders', groupKey: 'd', sequence: 5 });
    await counted({ id: 'd-9', source: 'orders', groupKey: 'd', sequence: 9 });
    const again = await counted({ id: 'd-5', source: 'orders', groupKey: 'd', sequence: 5 });
    expect(again.outcome).toMatchObject({ duplicate: true });
    // The savepoint, the record that found it, the release, and the read of when it was handled.
    expect(again.statements).toHaveLength(4);
    const [row] = await fixture.query(
      `SELECT highest::text AS highest, (SELECT count(*)::int FROM statements_inbox WHERE message_id = 'd-5') AS records FROM statements_inbox_groups WHERE group_key = 'd'`,
    );
    expect(row).toEqual({ highest: '9', records: 1 });
  });
});
