/**
 * The pg adapter sends the publish INSERT and the relay's fixed statements as prepared statements,
 * and falls back to unprepared ones behind a pooler that loses them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, batchRelay, type SqlQuery } from 'outboxer';
import { nodePostgres, type PgPoolLike } from 'outboxer/pg';
import { postgresFixture } from '../support/databases.js';
import { waitUntil } from '../support/random.js';

type PgFixture = Awaited<ReturnType<typeof postgresFixture>>;

describe('prepared statements on a real Postgres', () => {
  let fixture: PgFixture;
  beforeAll(async () => {
    fixture = await postgresFixture(1); // one connection: the one the statements are prepared on
  });
  afterAll(() => fixture.close());

  test('a draining relay prepares its poll and acknowledgement once, and Postgres stops planning them', async () => {
    let delivered = 0;
    const outboxer = new Outboxer({
      database: fixture.database,
      outboxes: {
        prepared: {
          table: 'prepared',
          batchSize: 10,
          relay: batchRelay(async (batch) => void (delivered += batch.length)),
        },
      },
    });
    await outboxer.migrate();
    await fixture.transaction(async (tx) => {
      await outboxer.publishMany(
        tx,
        Array.from({ length: 500 }, (_, i) => ({ outbox: 'prepared', payload: i, groupKey: `g${i % 9}` })),
      );
    });
    await outboxer.start();
    await waitUntil(async () => (await outboxer.counts('prepared')).pending === 0, 30_000, 'the drain');
    await outboxer.stop();
    expect(delivered).toBe(500);
    const statements = await fixture.query(
      `SELECT name, generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements
       WHERE statement LIKE '%lease_epoch%'`,
    );
    expect(statements).toHaveLength(1);
    expect(statements[0]!.name).toMatch(/^outboxer_[0-9a-f]{24}$/);
    // Postgres plans the first five executions for their values, then keeps the generic plan.
    expect(statements[0]!.generic).toBeGreaterThan(statements[0]!.custom);
    await outboxer.close();
  });

  test('publish prepares its INSERT once per connection', async () => {
    const outboxer = new Outboxer({
      database: fixture.database,
      relay: false,
      outboxes: { published: { table: 'published' } },
    });
    await outboxer.migrate();
    for (let i = 0; i < 3; i += 1) {
      await fixture.transaction(async (tx) => outboxer.publish(tx, 'published', { i }, { groupKey: 'g' }));
    }
    const statements = await fixture.query(
      `SELECT name FROM pg_prepared_statements WHERE statement LIKE 'WITH inserted AS (INSERT INTO "published"%'`,
    );
    expect(statements).toHaveLength(1);
    expect((await outboxer.counts('published')).pending).toBe(3);
    await outboxer.close();
  });

  test('a publish whose prepared statement the server lost rejects with a retryable typed error; the retry runs unprepared', async () => {
    // DEALLOCATE behind pg's back is what a pooler moving the session looks like: pg believes the
    // statement is prepared and sends only Bind, and the server answers 26000.
    const outboxer = new Outboxer({
      database: nodePostgres(fixture.pool),
      relay: false,
      outboxes: { lost: { table: 'lost' } },
    });
    await outboxer.migrate();
    await fixture.transaction((tx) => outboxer.publish(tx, 'lost', { n: 1 }));
    await fixture.query('DEALLOCATE ALL');
    const failed = fixture.transaction((tx) => outboxer.publish(tx, 'lost', { n: 2 }));
    await expect(failed).rejects.toMatchObject({
      code: 'DATABASE_UNSUPPORTED',
      retryable: true,
      cause: expect.objectContaining({ code: '26000' }),
    });
    await fixture.transaction((tx) => outboxer.publish(tx, 'lost', { n: 3 }));
    const payloads = await fixture.query('SELECT payload::text AS p FROM lost ORDER BY id');
    expect(payloads.map((r) => r.p)).toEqual(['{"n":1}', '{"n":3}']);
    const named = await fixture.query(
      `SELECT 1 FROM pg_prepared_statements WHERE statement LIKE 'INSERT INTO "lost"%'`,
    );
    expect(named).toHaveLength(0);
    await outboxer.close();
  });
});

describe('behind a pooler that loses prepared statements', () => {
  /** A pool whose named statements fail as they do when PgBouncer moves the session. */
  function poolLosingStatements(code: string) {
    const calls: { named: boolean; text: string }[] = [];
    const pool: PgPoolLike = {
      async query(query: string | { name?: string; text: string }) {
        const named = typeof query === 'object' && query.name !== undefined;
        const text = typeof query === 'string' ? query : query.text;
        calls.push({ named, text });
        if (named) throw Object.assign(new Error('prepared statement does not exist'), { code });
        return { rows: [{ ok: 1 }] };
      },
      connect: () => Promise.reject(new Error('not used')),
    };
    return { pool, calls };
  }
  const prepared: SqlQuery = { text: 'SELECT 1 AS ok', values: [], prepare: true };

  for (const code of ['26000', '42P05']) {
    test(`error ${code}: the statement runs again unprepared, and later ones are sent unprepared`, async () => {
      const { pool, calls } = poolLosingStatements(code);
      const adapter = nodePostgres(pool);
      expect(await adapter.execute(prepared)).toEqual([{ ok: 1 }]);
      expect(await adapter.execute(prepared)).toEqual([{ ok: 1 }]);
      expect(calls.map((c) => c.named)).toEqual([true, false, false]);
    });
  }

  test('another error is the caller’s, and prepared statements stay on', async () => {
    const { pool, calls } = poolLosingStatements('42P01');
    const adapter = nodePostgres(pool);
    await expect(adapter.execute(prepared)).rejects.toMatchObject({ code: '42P01' });
    await expect(adapter.execute(prepared)).rejects.toMatchObject({ code: '42P01' });
    expect(calls.map((c) => c.named)).toEqual([true, true]);
  });

  test('preparedStatements: false never names a statement', async () => {
    const { pool, calls } = poolLosingStatements('26000');
    const adapter = nodePostgres(pool, { preparedStatements: false });
    await adapter.execute(prepared);
    expect(calls.map((c) => c.named)).toEqual([false]);
  });
});
