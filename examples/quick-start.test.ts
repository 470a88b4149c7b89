import { expect, test } from 'vitest';
import { postgresFixture } from '../test/support/databases.js';
import { main } from './quick-start.js';

test("the README's quick start runs against Postgres and delivers the event", async () => {
  const fixture = await postgresFixture();
  const previous = process.env.DATABASE_URL;
  // The fixture's own schema, so the example's tables do not meet other tests'.
  process.env.DATABASE_URL = `${fixture.pool.options.connectionString}?options=-c%20search_path%3D${fixture.schema}`;
  try {
    const sent: unknown[] = [];
    await main(async (payload) => void sent.push(payload));
    expect(sent).toEqual([{ orderId: 42 }]);
  } finally {
    if (previous === undefined) delete process.env.DATABASE_URL;
    else process.env.DATABASE_URL = previous;
    await fixture.close();
  }
});
