import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { generatePrismaClient } from '../../test/adapters/prisma/client.js';
import { mikroOrmMissing } from '../../test/support/mikro-orm.js';
import { nodeSqliteMissing } from '../../test/support/node-sqlite.js';
import { scratchDatabaseFor, withScratchDatabase } from '../../test/support/scratch-database.js';

/** What every example returns: what the relay received, and the outbox counts at the end. */
interface ExampleResult {
  delivered: Array<{ type: string | null; groupKey: string | null; payload: unknown }>;
  counts: { pending: number; delivered: number; dead: number };
}

const expected = [{ type: 'OrderPlaced', groupKey: 'order:1', payload: { orderId: 1, total: 4200 } }];

// Runs each documented adapter example (Postgres and MariaDB, each in a database of its own;
// better-sqlite3 and node:sqlite in memory): the committed order's event is relayed, the rolled-back
// one is not, and the outbox ends empty.
test.each([
  'pg',
  'better-sqlite3',
  ...(nodeSqliteMissing === undefined ? ['node-sqlite'] : []),
  'postgres-js',
  'kysely',
  'kysely-mysql',
  'drizzle',
  'drizzle-mysql',
  'prisma/example',
  'prisma/mysql/example',
  'knex',
  'knex-mysql',
  'typeorm',
  'typeorm-mysql',
  ...(mikroOrmMissing === undefined ? ['mikro-orm', 'mikro-orm-mysql'] : []),
])('the %s example relays the committed order only', async (name) => {
  // What `npx prisma generate` does in an application: the example imports the generated client.
  if (name.startsWith('prisma/')) {
    generatePrismaClient(fileURLToPath(new URL(`./${dirname(name)}/schema.prisma`, import.meta.url)));
  }
  const { main } = (await import(`./${name}.js`)) as { main: (url?: string) => Promise<ExampleResult> };
  const inMemory = name === 'better-sqlite3' || name === 'node-sqlite';
  const result = inMemory ? await main() : await scratchDatabaseFor(name)((url) => main(url));
  expect(result.delivered).toEqual(expected);
  expect(result.counts).toMatchObject({ pending: 0, dead: 0 });
});

test('the Drizzle example on SQLite publishes synchronously and relays the committed order only', async () => {
  const { mainSqlite } = await import('./drizzle.js');
  const result = await mainSqlite();
  expect(result.delivered).toEqual(expected);
  expect(result.counts).toMatchObject({ pending: 0, dead: 0 });
});

test('running an example twice against the same database works (it leaves its tables behind)', async () => {
  const { main } = await import('./pg.js');
  await withScratchDatabase(async (url) => {
    await main(url);
    const second = await main(url);
    expect(second.delivered).toEqual([
      { type: 'OrderPlaced', groupKey: 'order:3', payload: { orderId: 3, total: 4200 } },
    ]);
    expect(second.counts).toMatchObject({ pending: 0, dead: 0 });
  });
});

if (mikroOrmMissing !== undefined) {
  test.skip(`the mikro-orm and mikro-orm-mysql examples: ${mikroOrmMissing}`, () => undefined);
}

if (nodeSqliteMissing !== undefined) {
  test.skip(`the node-sqlite example relays the committed order only: ${nodeSqliteMissing}`, () => undefined);
}
