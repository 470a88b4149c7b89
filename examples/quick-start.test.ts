import { expect, test, vi } from 'vitest';
import { postgresFixture } from '../test/support/databases.js';

test("the README's quick start runs as written on an empty schema and delivers the event", async () => {
  const fixture = await postgresFixture();
  // A fresh schema with nothing in it: the example creates its own `orders` table and outboxer's.
  expect(
    await fixture.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = $1`, [fixture.schema]),
  ).toEqual([{ n: 0 }]);
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
