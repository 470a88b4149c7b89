/**
 * Hono takes the fetch handler as it is (`c.req.raw`): the page, the API and a change, through a
 * real Hono app, under a path prefix.
 */
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Outboxer, functionRelay } from 'outboxer';
import { createDashboard } from '../../src/dashboard/index.js';
import { fixtures, publishInTransaction, type Fixture } from '../support/databases.js';

describe.each(fixtures)('the dashboard in Hono on $name', ({ make }) => {
  let fixture: Fixture;
  beforeAll(async () => {
    fixture = await make();
  });
  afterAll(() => fixture.close());

  test('serves the page and the API, and takes a change from its own origin', async () => {
    const outboxer = new Outboxer({
      database: fixture.database,
      testing: 'manual',
      logger: false,
      outboxes: {
        orders: {
          table: 'dash_hono',
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

    const dashboard = createDashboard(outboxer, { basePath: '/admin/outbox', mutations: true });
    const app = new Hono();
    app.get('/', (c) => c.text('the app'));
    app.all('/admin/outbox', (c) => dashboard(c.req.raw));
    app.all('/admin/outbox/*', (c) => dashboard(c.req.raw));

    const origin = 'http://app.example';
    expect(await (await app.request(`${origin}/`)).text()).toBe('the app');
    expect(await (await app.request(`${origin}/admin/outbox`)).text()).toContain(
      '<meta name="outboxer-base" content="/admin/outbox">',
    );
    const overview = (await (await app.request(`${origin}/admin/outbox/api/overview`)).json()) as {
      token: string;
      outboxes: Array<{ counts: { dead: number } }>;
    };
    expect(overview.outboxes[0]!.counts.dead).toBe(1);
    const retried = await app.request(`${origin}/admin/outbox/api/retry`, {
      method: 'POST',
      headers: { origin, 'content-type': 'application/json', 'x-outboxer-token': overview.token },
      body: JSON.stringify({ outbox: 'orders', ids: [id] }),
    });
    expect(await retried.json()).toEqual({ affected: 1 });
    expect((await outboxer.counts('orders')).dead).toBe(0);
    await outboxer.close();
  });
});
