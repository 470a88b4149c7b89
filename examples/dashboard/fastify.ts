/**
 * outboxer's dashboard in Fastify (read-only: changes are off unless `mutations: true`), on an
 * outbox in Node's built-in SQLite (a stand-in for your own instance). Fastify parses the JSON
 * body of a change; the wrapper passes it on.
 *
 *   npx tsx examples/dashboard/fastify.ts                      (checks the page, then stops)
 *   SERVE_SECONDS=600 npx tsx examples/dashboard/fastify.ts    (open the printed address)
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import Fastify from 'fastify';
import { Outboxer, functionRelay } from 'outboxer';
import { createDashboard, fastifyDashboard } from 'outboxer/dashboard';
import { nodeSqlite } from 'outboxer/node-sqlite';

export async function main(serveSeconds = Number(process.env.SERVE_SECONDS ?? 0)) {
  const db = new DatabaseSync(':memory:');
  // A publish-only instance is enough to look: the relaying nodes run elsewhere.
  const outboxer = new Outboxer({
    database: nodeSqlite(db),
    relay: false,
    outboxes: { orders: { relay: functionRelay(async () => {}) } },
  });
  await outboxer.migrate();

  const app = Fastify();
  const dashboard = fastifyDashboard(createDashboard(outboxer, { basePath: '/admin/outbox' }));
  app.all('/admin/outbox', dashboard);
  app.all('/admin/outbox/*', dashboard);
  const address = await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
  const url = `${address}/admin/outbox/`;
  try {
    console.log(`dashboard on ${url}`);
    const page = await fetch(url);
    console.log(`GET ${url}: ${page.status} ${page.headers.get('content-type')}`);
    await sleep(serveSeconds * 1000);
    return { url, status: page.status };
  } finally {
    await app.close();
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
