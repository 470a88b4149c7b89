/**
 * outboxer's dashboard in a plain node:http server, read-only for everyone and with changes for
 * operators, on an outbox in Node's built-in SQLite (a stand-in for your own instance).
 *
 *   npx tsx examples/dashboard/node-http.ts                      (checks the page, then stops)
 *   SERVE_SECONDS=600 npx tsx examples/dashboard/node-http.ts    (open the printed address)
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import { Outboxer, functionRelay } from 'outboxer';
import { createDashboard, toNodeHandler } from 'outboxer/dashboard';
import { nodeSqlite } from 'outboxer/node-sqlite';

/** Your own check, from a session cookie or a header your proxy sets. */
function isAdmin(request: Request): boolean {
  return request.headers.get('x-forwarded-groups')?.split(',').includes('ops') ?? false;
}

export async function main(serveSeconds = Number(process.env.SERVE_SECONDS ?? 0)) {
  const db = new DatabaseSync(':memory:');
  // A publish-only instance is enough to look and to act: the relaying nodes run elsewhere.
  const outboxer = new Outboxer({
    database: nodeSqlite(db),
    relay: false,
    outboxes: { orders: { relay: functionRelay(async () => {}) } },
  });
  await outboxer.migrate();

  const dashboard = createDashboard(outboxer, {
    basePath: '/admin/outbox',
    mutations: true,
    authorize: (request, action) => action === 'view' || isAdmin(request),
  });
  const server = createServer(toNodeHandler(dashboard)).listen(Number(process.env.PORT ?? 0), '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/admin/outbox/`;
  try {
    console.log(`dashboard on ${url}`);
    const page = await fetch(url);
    console.log(`GET ${url}: ${page.status} ${page.headers.get('content-type')}`);
    await sleep(serveSeconds * 1000);
    return { url, status: page.status };
  } finally {
    server.close();
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
