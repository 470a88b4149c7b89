import { expect, test } from 'vitest';
import { nodeSqliteMissing } from '../../test/support/node-sqlite.js';
import type { ExampleResult } from './support.js';

const expected = [{ type: 'OrderPlaced', groupKey: 'order:1', payload: { orderId: 1, total: 4200 } }];

// Runs each documented adapter example (Postgres; better-sqlite3 and node:sqlite on SQLite): the committed order's
// event is relayed, the rolled-back one is not, and the outbox ends empty.
test.each([
  'pg',
  'better-sqlite3',
  ...(nodeSqliteMissing === undefined ? ['node-sqlite'] : []),
  'postgres-js',
  'kysely',
  'drizzle',
  'prisma',
  'knex',
  'typeorm',
  'mikro-orm',
])('the %s example relays the committed order only', async (name) => {
  const { main } = (await import(`./${name}.js`)) as { main: () => Promise<ExampleResult> };
  const result = await main();
  expect(result.delivered).toEqual(expected);
  expect(result.counts).toMatchObject({ pending: 0, dead: 0 });
});

test('the Drizzle example on SQLite publishes synchronously and relays the committed order only', async () => {
  const { mainSqlite } = await import('./drizzle.js');
  const result = await mainSqlite();
  expect(result.delivered).toEqual(expected);
  expect(result.counts).toMatchObject({ pending: 0, dead: 0 });
});

if (nodeSqliteMissing !== undefined) {
  test.skip(`the node-sqlite example relays the committed order only: ${nodeSqliteMissing}`, () => undefined);
}
