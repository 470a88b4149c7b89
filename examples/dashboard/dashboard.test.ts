/** Each mounting example of docs/dashboard.md serves the page where it says it does. */
import { expect, test } from 'vitest';
import { nodeSqliteMissing } from '../../test/support/node-sqlite.js';

test.skipIf(nodeSqliteMissing !== undefined).each(['node-http', 'express', 'fastify', 'hono'])(
  'the %s example serves the dashboard under /admin/outbox/',
  async (name) => {
    const { main } = (await import(`./${name}.js`)) as {
      main: () => Promise<{ url: string; status: number }>;
    };
    const { url, status } = await main();
    expect(url).toMatch(/\/admin\/outbox\/$/);
    expect(status).toBe(200);
  },
);
