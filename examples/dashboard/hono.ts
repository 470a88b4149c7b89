/**
 * outboxer's dashboard in Hono, or any framework that hands over a web `Request` (read-only:
 * changes are off unless `mutations: true`), on an outbox in Node's built-in SQLite (a stand-in
 * for your own instance). Serve `app` as you serve Hono (Bun, Deno, Workers, `@hono/node-server`);
 * this example asks it for the page in-process.
 *
 *   npx tsx examples/dashboard/hono.ts
 */
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { Hono } from 'hono';
import { Outboxer, functionRelay } from 'outboxer';
import { createDashboard } from 'outboxer/dashboard';
import { nodeSqlite } from 'outboxer/node-sqlite';

export async function main() {
  const db = new DatabaseSync(':memory:');
  // A publish-only instance is enough to look: the relaying nodes run elsewhere.
  const outboxer = new Outboxer({
    database: nodeSqlite(db),
    relay: false,
    outboxes: { orders: { relay: functionRelay(async () => {}) } },
  });
  await outboxer.migrate();

  const dashboard = createDashboard(outboxer, { basePath: '/admin/outbox' });
  const app = new Hono();
  // Hono hands over the web Request as it is.
  app.all('/admin/outbox', (c) => dashboard(c.req.raw));
  app.all('/admin/outbox/*', (c) => dashboard(c.req.raw));
  try {
    const page = await app.request('http://localhost/admin/outbox/');
    console.log(`GET /admin/outbox/: ${page.status} ${page.headers.get('content-type')}`);
    return { url: '/admin/outbox/', status: page.status };
  } finally {
    await outboxer.stop();
    db.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
