import { expect, test, vi } from 'vitest';
import { postgresFixture } from '../test/support/databases.js';

test("the README's quick start runs against Postgres and delivers the event", async () => {
  const fixture = await postgresFixture();
  // The application's own table, which the quick start updates in the transaction that publishes.
  await fixture.query(`CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL)`);
  await fixture.query(`INSERT INTO orders VALUES (42, 'placed')`);
  const previous = process.env.DATABASE_URL;
  // The fixture's own schema, so the example's tables do not meet other tests'.
  process.env.DATABASE_URL = `${fixture.pool.options.connectionString}?options=-c%20search_path%3D${fixture.schema}`;
  const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
  try {
    await import('./quick-start.js'); // runs the script, top-level await included
    expect(log.mock.calls).toEqual([['delivered', { orderId: 42 }]]);
    expect(await fixture.query('SELECT status FROM orders')).toEqual([{ status: 'paid' }]);
    expect(await fixture.query('SELECT count(*)::int AS n FROM outboxer_messages')).toEqual([{ n: 0 }]);
  } finally {
    log.mockRestore();
    if (previous === undefined) delete process.env.DATABASE_URL;
    else process.env.DATABASE_URL = previous;
    await fixture.close();
  }
});
