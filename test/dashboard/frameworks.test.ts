/**
 * The dashboard mounted in real Express 5 and Fastify 5 servers, as docs/dashboard.md shows: the
 * page under its base path, the API, a change from the page's own origin, a change from another
 * origin refused, and (Express) the app's own routes left to the app.
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay } from 'outboxer';
import { createDashboard, expressDashboard, fastifyDashboard } from '../../src/dashboard/index.js';
import { fixtures, publishInTransaction, type Fixture } from '../support/databases.js';

type Mount = (
  dashboard: ReturnType<typeof createDashboard>,
) => Promise<{ url: string; close: () => Promise<void> }>;

const frameworks: Array<{ name: string; mount: Mount }> = [
  {
    name: 'Express',
    mount: async (dashboard) => {
      const app = express();
      app.use(expressDashboard(dashboard));
      app.get('/', (_req, res) => void res.send('the app'));
      const server = app.listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      return {
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: () => new Promise((resolve) => server.close(() => resolve())),
      };
    },
  },
  {
    name: 'Fastify',
    mount: async (dashboard) => {
      const app = Fastify();
      const handler = fastifyDashboard(dashboard);
      app.all('/admin/outbox', handler);
      app.all('/admin/outbox/*', handler);
      app.get('/', async () => 'the app');
      const url = await app.listen({ port: 0, host: '127.0.0.1' });
      return { url, close: () => app.close() };
    },
  },
];

describe.each(fixtures)('the dashboard in real frameworks on $name', ({ make }) => {
  let fixture: Fixture;
  beforeAll(async () => void (fixture = await make()));
  afterAll(() => fixture.close());

  test.each(frameworks)('$name: page, API and a change from its own origin only', async ({ name, mount }) => {
    const outboxer = new Outboxer({
      database: fixture.database,
      testing: 'manual',
      logger: false,
      outboxes: {
        orders: {
          table: `dash_${name.toLowerCase()}`,
          maxAttempts: 1,
          relay: functionRelay(async () => Promise.reject(new Error('down'))),
        },
      },
    }) as Outboxer<never, boolean>;
    await outboxer.migrate();
    const [id] = await publishInTransaction(fixture, outboxer, [
      { outbox: 'orders', payload: 1, groupKey: 'g' },
    ]);
    await outboxer.drain('orders');

    const server = await mount(createDashboard(outboxer, { basePath: '/admin/outbox', mutations: true }));
    try {
      expect(await (await fetch(`${server.url}/`)).text()).toBe('the app');
      const page = await fetch(`${server.url}/admin/outbox`);
      expect(page.headers.get('content-type')).toMatch(/text\/html/);
      expect(await page.text()).toContain('<meta name="outboxer-base" content="/admin/outbox">');
      const overview = (await (await fetch(`${server.url}/admin/outbox/api/overview`)).json()) as {
        token: string;
        outboxes: Array<{ counts: { dead: number } }>;
      };
      expect(overview.outboxes[0]!.counts.dead).toBe(1);

      const retry = (origin: string) =>
        fetch(`${server.url}/admin/outbox/api/retry`, {
          method: 'POST',
          headers: { origin, 'content-type': 'application/json', 'x-outboxer-token': overview.token },
          body: JSON.stringify({ outbox: 'orders', ids: [id] }),
        });
      expect((await retry('http://evil.example')).status).toBe(403);
      expect((await outboxer.counts('orders')).dead).toBe(1);
      const retried = await retry(server.url);
      expect(await retried.json()).toEqual({ affected: 1 });
      expect((await outboxer.counts('orders')).dead).toBe(0);
    } finally {
      await server.close();
      await outboxer.close();
    }
  });
});
