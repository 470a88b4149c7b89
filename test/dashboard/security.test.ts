/**
 * The dashboard's security model over HTTP, and in Chromium for the cross-origin case: read-only
 * by default, no change on GET, same-origin and token checks on every change, the authorize hook,
 * redaction, the base path, the checked options and the telemetry of actions and refusals.
 */
import diagnostics from 'node:diagnostics_channel';
import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { isOutboxerError, type Outboxer } from 'outboxer';
import { createDashboard, toNodeHandler, type DashboardAction } from '../../src/dashboard/index.js';
import { fixtures, publishInTransaction, type Fixture } from '../support/databases.js';
import { closeServer, listen, openBrowser, relayedOutboxer, serveDashboard } from './support.js';

describe.each(fixtures)('dashboard security on $name', ({ make }) => {
  let fixture: Fixture;
  let outboxer: Outboxer<never, boolean>;
  let tables = 0;
  beforeAll(async () => {
    fixture = await make();
  });
  afterAll(() => fixture.close());

  /** An outbox in manual testing mode with `dead` dead messages of group `g` (one when it parks). */
  async function withDead(dead: number, onDead: 'continue' | 'park' = 'continue') {
    const made = relayedOutboxer(fixture, { orders: { maxAttempts: 1 } }, `dash_sec_${++tables}`);
    outboxer = new (made.outboxer.constructor as typeof Outboxer)({
      database: fixture.database,
      logger: false,
      testing: 'manual',
      outboxes: {
        orders: {
          relay: made.outboxer.outbox('orders').relay,
          table: `dash_sec_${tables}`,
          maxAttempts: 1,
          onDead,
        },
      },
    }) as Outboxer<never, boolean>;
    await outboxer.migrate();
    const ids = await publishInTransaction(
      fixture,
      outboxer,
      Array.from({ length: dead }, (_, i) => ({
        outbox: 'orders',
        payload: { fail: true, secret: `s${i}` },
        groupKey: 'g',
      })),
    );
    await outboxer.drain('orders');
    return ids;
  }

  const deadCount = async () => (await outboxer.counts('orders')).dead;

  /** GETs the overview for its token, then POSTs `body` to `path` as the page would, with `headers` changed. */
  async function change(
    base: string,
    path: string,
    body: unknown,
    headers: Record<string, string | null> = {},
  ) {
    const { token } = (await (await fetch(`${base}/api/overview`)).json()) as { token: string };
    const sent: Record<string, string> = {
      'content-type': 'application/json',
      'x-outboxer-token': token,
      origin: new URL(base).origin,
    };
    for (const [name, value] of Object.entries(headers)) {
      if (value === null) delete sent[name];
      else sent[name] = value;
    }
    return fetch(`${base}${path}`, { method: 'POST', headers: sent, body: JSON.stringify(body) });
  }

  test('read-only by default: every change is refused with 405 and nothing changes', async () => {
    const ids = await withDead(2);
    const dashboard = await serveDashboard(outboxer);
    try {
      const overview = (await (await fetch(`${dashboard.origin}/api/overview`)).json()) as {
        mutations: boolean;
      };
      expect(overview.mutations).toBe(false);
      for (const [path, body] of [
        ['/api/retry', { outbox: 'orders', ids }],
        ['/api/redrive', { outbox: 'orders', group: 'g' }],
        ['/api/discard', { outbox: 'orders', ids }],
      ] as const) {
        const response = await change(dashboard.origin, path, body);
        expect(response.status, path).toBe(405);
      }
      expect(await deadCount()).toBe(2);
    } finally {
      await dashboard.close();
    }
  });

  test('no change on GET; a change needs the same origin, JSON and the token', async () => {
    const ids = await withDead(3);
    const refused: unknown[] = [];
    const actions: unknown[] = [];
    const onRefused = (event: unknown) => refused.push(event);
    const onAction = (event: unknown) => actions.push(event);
    diagnostics.subscribe('outboxer:dashboard:refused', onRefused);
    diagnostics.subscribe('outboxer:dashboard:action', onAction);
    const dashboard = await serveDashboard(outboxer, { mutations: true });
    try {
      const base = dashboard.origin;
      expect((await fetch(`${base}/api/retry?outbox=orders&ids=${ids[0]}`)).status).toBe(405);
      expect(
        (await change(base, '/api/retry', { outbox: 'orders', ids }, { origin: 'http://evil.example' }))
          .status,
      ).toBe(403);
      expect((await change(base, '/api/retry', { outbox: 'orders', ids }, { origin: 'null' })).status).toBe(
        403,
      );
      expect(
        (await change(base, '/api/retry', { outbox: 'orders', ids }, { 'sec-fetch-site': 'cross-site' }))
          .status,
      ).toBe(403);
      expect(
        (await change(base, '/api/retry', { outbox: 'orders', ids }, { 'sec-fetch-site': 'same-site' }))
          .status,
      ).toBe(403);
      expect(
        (await change(base, '/api/retry', { outbox: 'orders', ids }, { 'x-outboxer-token': null })).status,
      ).toBe(403);
      expect(
        (await change(base, '/api/retry', { outbox: 'orders', ids }, { 'x-outboxer-token': 'guess' })).status,
      ).toBe(403);
      expect(
        (await change(base, '/api/retry', { outbox: 'orders', ids }, { 'content-type': 'text/plain' }))
          .status,
      ).toBe(403);
      expect(await deadCount()).toBe(3);
      expect(refused).toHaveLength(8);
      expect(refused[1]).toMatchObject({ action: 'retry', reason: expect.stringContaining('cross-origin') });

      // Bad input is a 400 that names the problem; an unknown outbox a 404.
      const bad = await change(base, '/api/retry', { outbox: 'orders', ids: ['1; DROP TABLE'] });
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: string }).error).toMatch(/ids/);
      expect((await change(base, '/api/discard', { outbox: 'nope', ids })).status).toBe(404);
      expect((await change(base, '/api/redrive', { outbox: 'orders', ids })).status).toBe(400);
      expect((await change(base, '/api/retry', { outbox: 'orders', group: '' })).status).toBe(400);

      // From the page's origin, with the token: done, and recorded.
      const ok = await change(
        base,
        '/api/retry',
        { outbox: 'orders', ids: [ids[0]] },
        { 'sec-fetch-site': 'same-origin' },
      );
      expect(ok.status).toBe(200);
      expect(await ok.json()).toEqual({ affected: 1 });
      const discarded = await change(
        base,
        '/api/discard',
        { outbox: 'orders', ids: [ids[1]] },
        { origin: null },
      );
      expect(await discarded.json()).toEqual({ affected: 1 });
      expect(await deadCount()).toBe(1);
      expect(actions).toEqual([
        {
          instance: 'outboxer',
          outbox: 'orders',
          action: 'retry',
          ids: [ids[0]],
          groupKey: null,
          affected: 1,
        },
        {
          instance: 'outboxer',
          outbox: 'orders',
          action: 'discard',
          ids: [ids[1]],
          groupKey: null,
          affected: 1,
        },
      ]);
    } finally {
      diagnostics.unsubscribe('outboxer:dashboard:refused', onRefused);
      diagnostics.unsubscribe('outboxer:dashboard:action', onAction);
      await dashboard.close();
    }
  });

  test('the authorize hook is asked for every request with its action', async () => {
    const ids = await withDead(2);
    const asked: DashboardAction[] = [];
    const dashboard = await serveDashboard(outboxer, {
      mutations: true,
      authorize: async (request, action) => {
        asked.push(action);
        return request.headers.get('x-role') === 'admin' || action === 'view';
      },
    });
    try {
      expect((await fetch(dashboard.url)).status).toBe(200);
      expect((await change(dashboard.origin, '/api/discard', { outbox: 'orders', ids })).status).toBe(403);
      expect(await deadCount()).toBe(2);
      const allowed = await change(
        dashboard.origin,
        '/api/redrive',
        { outbox: 'orders', group: 'g' },
        { 'x-role': 'admin' },
      );
      expect(await allowed.json()).toEqual({ affected: 2 });
      expect(asked).toEqual(['view', 'view', 'discard', 'view', 'redrive']);
    } finally {
      await dashboard.close();
    }
    const closed = await serveDashboard(outboxer, { authorize: () => false });
    try {
      expect((await fetch(closed.url)).status).toBe(403);
      expect((await fetch(`${closed.origin}/api/overview`)).status).toBe(403);
      expect((await fetch(`${closed.origin}/api/blocked?outbox=orders&prefix=g`)).status).toBe(403);
    } finally {
      await closed.close();
    }
  });

  test('redact hides payloads and headers; the page carries a strict CSP', async () => {
    const ids = await withDead(1, 'park');
    const dashboard = await serveDashboard(outboxer, {
      redact: (m) => ({
        payload: '[redacted]',
        headers: {},
        lastError: m.lastError?.replace(/s\d/, '…') ?? null,
      }),
    });
    try {
      const page = (await (
        await fetch(`${dashboard.origin}/api/messages?outbox=orders&status=dead`)
      ).json()) as {
        messages: Array<{ payload: unknown; id: number }>;
      };
      expect(page.messages.map((m) => m.payload)).toEqual(['[redacted]']);
      const one = (await (
        await fetch(`${dashboard.origin}/api/message?outbox=orders&id=${ids[0]}`)
      ).json()) as { payload: unknown };
      expect(one.payload).toBe('[redacted]');
      expect(JSON.stringify(page)).not.toContain('s0');
      const overview = (await (await fetch(`${dashboard.origin}/api/overview`)).json()) as {
        outboxes: Array<{ blocked: Array<{ lastError: string | null }> }>;
      };
      expect(overview.outboxes[0]!.blocked.map((g) => g.lastError)).toEqual([null]);
      // The search's heads leave out their errors too; a prefix past 1000 characters is refused.
      const found = (await (
        await fetch(`${dashboard.origin}/api/blocked?outbox=orders&prefix=g`)
      ).json()) as {
        groups: Array<{ lastError: string | null }>;
      };
      expect(found.groups.map((g) => g.lastError)).toEqual([null]);
      const long = `${dashboard.origin}/api/blocked?outbox=orders&prefix=${'x'.repeat(1001)}`;
      expect((await fetch(long)).status).toBe(400);
      const html = await fetch(dashboard.url);
      const csp = html.headers.get('content-security-policy')!;
      expect(csp).toMatch(/default-src 'none'; script-src 'nonce-[^']+'/);
      const nonce = /nonce-([^']+)/.exec(csp)![1]!;
      expect(await html.text()).toContain(`<script nonce="${nonce}">`);
      expect(html.headers.get('x-frame-options')).toBe('DENY');
    } finally {
      await dashboard.close();
    }
  });

  test('mounted under a base path; outside it, 404 or the next middleware', async () => {
    await withDead(0);
    const handler = createDashboard(outboxer, { basePath: '/admin/outbox/' });
    const nexts: string[] = [];
    const node = toNodeHandler(handler);
    const server = createServer((req, res) =>
      node(req, res, () => {
        nexts.push(req.url ?? '');
        res.writeHead(418).end();
      }),
    );
    const origin = await listen(server);
    try {
      expect((await fetch(`${origin}/admin/outbox`)).headers.get('content-type')).toMatch(/text\/html/);
      expect((await fetch(`${origin}/admin/outbox/`)).status).toBe(200);
      expect((await fetch(`${origin}/admin/outbox/api/overview`)).status).toBe(200);
      expect((await fetch(`${origin}/admin/outbox/api/nothing`)).status).toBe(404);
      expect((await fetch(`${origin}/admin/outboxes`)).status).toBe(418);
      expect((await fetch(`${origin}/api/overview`)).status).toBe(418);
      expect(nexts).toEqual(['/admin/outboxes', '/api/overview']);
      expect((await handler(new Request('http://x/elsewhere'))).status).toBe(404);
      const html = await (await fetch(`${origin}/admin/outbox`)).text();
      expect(html).toContain('<meta name="outboxer-base" content="/admin/outbox">');
    } finally {
      await closeServer(server);
    }
  });

  test('options are checked at creation, naming the option and what it accepts', async () => {
    await withDead(0);
    const refused = (options: unknown) => {
      try {
        createDashboard(outboxer, options as never);
      } catch (error) {
        expect(isOutboxerError(error)).toBe(true);
        return `${(error as { code: string }).code}: ${(error as Error).message}`;
      }
      throw new Error('accepted');
    };
    expect(refused({ basePath: 'admin' })).toMatch(
      /^INVALID_OPTIONS: Option "basePath" must be a path such as/,
    );
    expect(refused({ basePath: '/a/../b' })).toMatch(/basePath/);
    expect(refused({ mutations: 'yes' })).toMatch(/Option "mutations" must be true or false; got "yes"/);
    expect(refused({ authorize: true })).toMatch(/Option "authorize" must be a function/);
    expect(refused({ refreshInterval: 10 })).toMatch(/refreshInterval.*500 to 60000/);
    expect(refused({ colour: 'red' })).toMatch(/Unknown option "colour"/);
    expect(refused({ outboxes: ['nope'] })).toMatch(/^UNKNOWN_OUTBOX/);
  });

  test('a page of another origin cannot make a change, in a real browser', async () => {
    const ids = await withDead(2);
    const browser = await openBrowser();
    const dashboard = await serveDashboard(outboxer, { mutations: true });
    const target = `${dashboard.origin}/api/discard`;
    const body = JSON.stringify({ outbox: 'orders', ids });
    // Another origin (localhost, not 127.0.0.1, and another port) that tries every way to post.
    const evil = createServer((_req, res) => {
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(
          `<!doctype html><form id="f" method="POST" action="${target}" enctype="text/plain"><input name='${body.slice(0, -1)}' value='}'></form>`,
        );
    });
    const evilOrigin = (await listen(evil)).replace('127.0.0.1', 'localhost');
    const page = await browser.context.newPage();
    const refused: unknown[] = [];
    const onRefused = (event: unknown) => refused.push(event);
    diagnostics.subscribe('outboxer:dashboard:refused', onRefused);
    try {
      await page.goto(evilOrigin);
      const outcomes = await page.evaluate(
        async ({ target, body }) => {
          const tries = [
            fetch(target, {
              method: 'POST',
              mode: 'no-cors',
              headers: { 'content-type': 'text/plain' },
              body,
            }),
            fetch(target, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'x-outboxer-token': 'x' },
              body,
            }),
            fetch(target.replace('/api/discard', '/api/overview')).then((r) => r.json()),
          ];
          return Promise.all(
            tries.map((t) =>
              t.then(
                () => 'answered',
                (e: Error) => `failed: ${e.name}`,
              ),
            ),
          );
        },
        { target, body },
      );
      // Nothing of the dashboard's answers is readable from there (no CORS), so no token either;
      // the JSON post with a guessed token is stopped at its preflight, which nothing answers.
      expect(outcomes.slice(1)).toEqual(['failed: TypeError', 'failed: TypeError']);
      // A plain HTML form post (no preflight, no custom header) reaches the server and is refused.
      await Promise.all([page.waitForURL(target), page.evaluate('document.getElementById("f").submit()')]);
      expect(await page.textContent('body')).toMatch(/refused|missing or wrong/);
      expect(refused.some((e) => (e as { action: string }).action === 'discard')).toBe(true);
      expect(await deadCount()).toBe(2);
    } finally {
      diagnostics.unsubscribe('outboxer:dashboard:refused', onRefused);
      await page.close();
      await browser.close();
      await closeServer(evil);
      await dashboard.close();
    }
  });
});
