/**
 * outboxer's metrics on a Prometheus /metrics endpoint with prom-client. One message goes dead on
 * purpose, so the gauges have something to show. SQLite stands in for your database.
 *
 *   npx tsx examples/operations/prometheus.ts
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { Outboxer, PermanentError, functionRelay } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { registerOutboxerMetrics } from 'outboxer/prometheus';

export async function main(): Promise<string> {
  const db = new Database(':memory:');
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
    outboxes: {
      orders: {
        relay: functionRelay(async (message) => {
          if (message.type === 'order.broken') throw new PermanentError('the billing service refused it');
        }),
        maxAttempts: 5,
        pollInterval: 50,
      },
    },
  });

  const registry = new Registry();
  collectDefaultMetrics({ register: registry }); // the usual process metrics, if you want them
  // Gauges read the outbox at scrape time, at most once per interval; counters follow the relay.
  const metrics = registerOutboxerMetrics(registry, outboxer, { outboxes: ['orders'], interval: 10_000 });
  const server = createServer(async (req, res) => {
    if (req.url !== '/metrics') return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': registry.contentType }).end(await registry.metrics());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

  try {
    await outboxer.migrate();
    await outboxer.start();
    db.transaction(() => {
      outboxer.publish(db, 'orders', { orderId: 1 }, { groupKey: 'order:1', type: 'order.placed' });
      outboxer.publish(db, 'orders', { orderId: 2 }, { groupKey: 'order:2', type: 'order.broken' });
    })();
    const deadline = Date.now() + 10_000;
    while ((await outboxer.counts('orders')).pending > 0) {
      if (Date.now() > deadline) throw new Error('the messages were not relayed within 10 s');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }

    // What Prometheus scrapes.
    const { port } = server.address() as AddressInfo;
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    for (const line of text.split('\n')) {
      if (
        /^outboxer_(messages_(pending|dead|delivered_total|dead_lettered_total)|groups_blocked)\{/.test(line)
      )
        console.log(line);
    }
    return text;
  } finally {
    await outboxer.stop();
    metrics.close();
    db.close();
    await new Promise((resolve) => server.close(resolve));
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
