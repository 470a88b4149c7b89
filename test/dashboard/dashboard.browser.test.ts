/**
 * The dashboard in a real browser (Debian's Chromium through playwright-core), on every dialect:
 * counts that move as messages flow, a parked group found and redriven (also one beyond the 200
 * oldest, by its key prefix), a dead message retried and delivered, one discarded after a
 * confirmation that names it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Outboxer } from 'outboxer';
import { fixtures, publishInTransaction, type Fixture } from '../support/databases.js';
import { openBrowser, relayedOutboxer, screenshot, see, serveDashboard } from './support.js';

describe.each(fixtures)('the dashboard in Chromium on $name', ({ make }) => {
  let fixture: Fixture;
  let browser: Awaited<ReturnType<typeof openBrowser>>;
  beforeAll(async () => {
    [fixture, browser] = await Promise.all([make(), openBrowser()]);
  });
  afterAll(async () => {
    await browser?.close();
    await fixture?.close();
  });

  test('counts move, a parked group is found and redriven, a dead message retried, another discarded', async () => {
    const { outboxer, delivered, control } = relayedOutboxer(
      fixture,
      {
        orders: { onDead: 'park', maxAttempts: 1, retention: { keep: 3600 }, partitions: 2 },
        events: { maxAttempts: 1, ordering: 'none', retention: { keep: 3600 } },
      },
      'dash_flow',
    );
    await outboxer.migrate();
    const dashboard = await serveDashboard(outboxer, { basePath: '/admin/outbox', mutations: true });
    const page = await browser.context.newPage();
    const requested: string[] = [];
    page.on('request', (request) => requested.push(request.url()));
    try {
      await page.goto(dashboard.url);
      const figure = (name: string) => page.locator(`[data-figure="${name}"] .value`);
      await see.text(figure('pending'), '0');
      await see.text(page.locator('#mode'), 'changes allowed');

      // Published while no node relays: the backlog shows, then drains once a node starts.
      await publishInTransaction(
        fixture,
        outboxer,
        Array.from({ length: 30 }, (_, i) => ({
          outbox: 'orders',
          payload: { n: i },
          groupKey: `order:${i % 5}`,
        })),
      );
      await see.text(figure('pending'), '30');
      await see.count(page.locator('#partitions tbody tr'), 2);
      await outboxer.start();
      await see.text(figure('delivered'), '30');
      await see.text(figure('pending'), '0');
      await see.count(page.locator('#nodes tbody tr'), 1);
      await see.text(page.locator('#nodes tbody tr td').nth(2), 'live');
      await see.className(page.locator('#partitions tbody tr').first().locator('td').nth(1), /state-live/);
      await page.locator('#chart polyline').first().waitFor({ state: 'attached' });

      // A poison message parks its group; the next message of the group waits behind it.
      const [poisonId] = await publishInTransaction(fixture, outboxer, [
        {
          outbox: 'orders',
          payload: { fail: true, error: 'card declined' },
          groupKey: 'order:7',
          type: 'order.paid',
        },
        { outbox: 'orders', payload: { n: 'after' }, groupKey: 'order:7', type: 'order.shipped' },
        { outbox: 'orders', payload: { fail: true }, groupKey: 'order:8' },
      ]);
      await see.text(figure('parked'), '2');
      await see.count(page.locator('#blocked tbody tr'), 2);
      await page.fill('#blocked-search', 'order:7');
      const row = page.locator('#blocked tbody tr');
      await see.count(row, 1);
      await see.text(row.locator('td').first(), 'order:7');
      await see.contains(row, 'parked');
      await see.contains(row, 'Error: card declined');
      await screenshot(page, 'overview');

      // Redrive: the head and the message behind it are delivered, in order.
      control.failing = false;
      await row.getByRole('button', { name: 'Redrive' }).click();
      await see.visible(page.locator('#confirm'));
      await see.contains(page.locator('#confirm-title'), 'order:7');
      await page.click('#confirm-ok');
      await see.count(page.locator('#blocked tbody tr'), 0);
      await expect
        .poll(() => delivered.filter((m) => m.groupKey === 'order:7').map((m) => m.type), { timeout: 30_000 })
        .toEqual(['order.paid', 'order.shipped']);
      expect(delivered.find((m) => m.groupKey === 'order:7')!.id).toBe(poisonId);

      // The other parked group, order:8, is still dead: find it in the dead list, retry it alone.
      control.failing = true;
      await page.fill('#blocked-search', '');
      await page.selectOption('#message-status', 'dead');
      const deadRows = page.locator('#messages tbody tr[data-id]');
      await see.count(deadRows, 1);
      await see.contains(deadRows.first(), 'order:8');
      await deadRows.first().click();
      await see.visible(page.locator('#detail'));
      await see.contains(page.locator('#detail-payload'), '"fail": true');
      await screenshot(page, 'detail');
      control.failing = false;
      await page.click('#detail-retry');
      await expect
        .poll(() => delivered.some((m) => m.groupKey === 'order:8'), { timeout: 30_000 })
        .toBe(true);
      await see.text(figure('dead'), '0');
      await see.count(deadRows, 0);

      // Discard from the other outbox: the confirmation names the message, its group and type.
      control.failing = true;
      const [doomed] = await publishInTransaction(fixture, outboxer, [
        { outbox: 'events', payload: { fail: true }, groupKey: 'user:1', type: 'user.renamed' },
      ]);
      await page.selectOption('#outbox-select', 'events');
      await see.text(figure('dead'), '1');
      await see.count(deadRows, 1);
      await deadRows.first().locator('input[type=checkbox]').check();
      await page.click('#discard-selected');
      await see.text(page.locator('#confirm-title'), 'Discard 1 message(s) for good?');
      await see.contains(
        page.locator('#confirm-list'),
        `#${doomed} · dead · group user:1 · type user.renamed`,
      );
      await see.contains(page.locator('#confirm-text'), 'payloads are lost');
      await screenshot(page, 'discard');
      await page.click('#confirm-ok');
      await see.count(deadRows, 0);
      await see.text(figure('dead'), '0');
      const left = await outboxer.findMessages('events', { status: 'dead' });
      expect(left.messages).toEqual([]);
      expect(delivered.some((m) => m.id === doomed)).toBe(false);
      // Nothing but the server that serves the page was asked for anything.
      expect(requested.length).toBeGreaterThan(10);
      expect(requested.filter((url) => !url.startsWith(`${dashboard.origin}/admin/outbox`))).toEqual([]);
    } finally {
      await page.close();
      await outboxer.stop();
      await dashboard.close();
    }
  });

  test('retry a selection, then every dead message of a group, in order', async () => {
    const { outboxer } = relayedOutboxer(fixture, { orders: { maxAttempts: 1 } }, 'dash_select');
    const manual = new (outboxer.constructor as typeof Outboxer)({
      database: fixture.database,
      logger: false,
      testing: 'manual',
      outboxes: { orders: { relay: outboxer.outbox('orders').relay, table: 'dash_select', maxAttempts: 1 } },
    }) as Outboxer<never, boolean>;
    await manual.migrate();
    const ids = await publishInTransaction(fixture, manual, [
      ...['g1', 'g2', 'g3'].map((n) => ({ outbox: 'orders', payload: { fail: true, n }, groupKey: 'g' })),
      ...['h1', 'h2'].map((n) => ({ outbox: 'orders', payload: { fail: true, n }, groupKey: 'h' })),
    ]);
    await manual.drain('orders');
    expect((await manual.counts('orders')).dead).toBe(5);
    const dashboard = await serveDashboard(manual, { mutations: true });
    const page = await browser.context.newPage();
    try {
      await page.goto(dashboard.url);
      const rows = page.locator('#messages tbody tr[data-id]');
      await see.count(rows, 5);
      for (const id of ids.slice(3)) await page.locator(`tr[data-id="${id}"] input[type=checkbox]`).check();
      await page.click('#retry-selected');
      await see.count(rows, 3);
      await see.contains(page.locator('#status'), 'Retried 2 dead message(s).');

      await page.fill('#filter-group', 'g');
      await page.click('#apply-filters');
      await see.visible(page.locator('#retry-group'));
      await see.text(page.locator('#retry-group'), 'Retry all dead of group g');
      await page.click('#retry-group');
      await see.count(rows, 0);
      const pending = await manual.findMessages('orders', { status: 'pending' });
      expect(pending.messages.map((m) => [m.id, m.state])).toEqual(ids.map((id) => [id, 'ready']));
      expect((await manual.counts('orders')).dead).toBe(0);
    } finally {
      await page.close();
      await manual.close();
      await dashboard.close();
    }
  });

  test('a parked group beyond the 200 oldest is found by its key prefix and redriven', async () => {
    const { outboxer } = relayedOutboxer(fixture, { orders: {} }, 'dash_search');
    const manual = new (outboxer.constructor as typeof Outboxer)({
      database: fixture.database,
      logger: false,
      testing: 'manual',
      outboxes: {
        orders: {
          relay: outboxer.outbox('orders').relay,
          table: 'dash_search',
          maxAttempts: 1,
          onDead: 'park',
        },
      },
    }) as Outboxer<never, boolean>;
    await manual.migrate();
    // 205 parked groups first, so the newest, needle:1, is not among the 200 the overview lists.
    await publishInTransaction(fixture, manual, [
      ...Array.from({ length: 205 }, (_, i) => ({
        outbox: 'orders',
        payload: { fail: true },
        groupKey: `bulk:${i}`,
      })),
      { outbox: 'orders', payload: { fail: true, error: 'needle refused' }, groupKey: 'needle:1' },
    ]);
    await manual.drain('orders');
    const dashboard = await serveDashboard(manual, { mutations: true });
    const page = await browser.context.newPage();
    try {
      await page.goto(dashboard.url);
      const rows = page.locator('#blocked tbody tr');
      await see.text(page.locator('[data-figure="parked"] .value'), '206');
      await see.count(rows, 200);
      await see.text(page.locator('#blocked-note'), 'the 200 oldest of 206 shown');
      expect(await page.locator('#blocked tbody tr[data-group="needle:1"]').count()).toBe(0);

      await page.fill('#blocked-search', 'needle');
      await see.count(rows, 1);
      await see.text(rows.first().locator('td').first(), 'needle:1');
      await see.contains(rows.first(), 'needle refused');
      await see.contains(page.locator('#blocked-note'), 'with a key starting with');
      // A prefix, not a substring: bulk:20 and bulk:200 to bulk:204.
      await page.fill('#blocked-search', 'bulk:20');
      await see.count(rows, 6);
      await page.fill('#blocked-search', 'needle:');
      await see.count(rows, 1);
      await rows.first().getByRole('button', { name: 'Redrive' }).click();
      await see.contains(page.locator('#confirm-title'), 'needle:1');
      await page.click('#confirm-ok');
      // Revived as a due retry, it still holds its group until delivered (no node relays here).
      await see.text(page.locator('[data-figure="parked"] .value'), '205');
      await see.text(page.locator('[data-figure="retrying"] .value'), '1');
      await see.count(rows, 1);
      await see.contains(rows.first(), 'retrying');
      const revived = await manual.findMessages('orders', { status: 'pending', groupKey: 'needle:1' });
      expect(revived.messages.map((m) => m.state)).toEqual(['retrying']);
    } finally {
      await page.close();
      await manual.close();
      await dashboard.close();
    }
  });

  test('a message is opened by its id; a hidden page asks nothing until it is shown again', async () => {
    const { outboxer } = relayedOutboxer(fixture, { orders: {} }, 'dash_find');
    await outboxer.migrate();
    const ids = await publishInTransaction(
      fixture,
      outboxer,
      ['a', 'b', 'c'].map((n) => ({ outbox: 'orders', payload: { n }, groupKey: 'g' })),
    );
    const dashboard = await serveDashboard(outboxer, { refreshInterval: 500 });
    const page = await browser.context.newPage();
    const overviews: number[] = [];
    page.on('request', (request) => {
      if (request.url().includes('/api/overview')) overviews.push(Date.now());
    });
    try {
      await page.goto(dashboard.url);
      await page.fill('#find-id', String(ids[1]));
      await page.press('#find-id', 'Enter');
      await see.visible(page.locator('#detail'));
      await see.text(page.locator('#detail-title'), `Message #${ids[1]}`);
      await see.contains(page.locator('#detail-payload'), '"n": "b"');
      await page.click('#detail-close');
      await page.fill('#find-id', 'x');
      await page.click('#open-id');
      await see.contains(page.locator('#status'), 'A message id is a whole number.');

      // Hidden (a background tab): the refresh in flight ends, then nothing is asked.
      const setVisibility = (state: 'hidden' | 'visible') =>
        page.evaluate((value) => {
          // Runs in the page: its document (the test's tsconfig has no DOM types).
          const page = (globalThis as unknown as { document: EventTarget }).document;
          Object.defineProperty(page, 'visibilityState', { value, configurable: true });
          page.dispatchEvent(new Event('visibilitychange'));
        }, state);
      // Shown, the page keeps asking (so that silence while hidden means something).
      const whileShown = overviews.length;
      await expect.poll(() => overviews.length, { timeout: 30_000 }).toBeGreaterThan(whileShown + 1);
      await setVisibility('hidden');
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const whileHidden = overviews.length;
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      expect(overviews.length, 'overview requests while hidden').toBe(whileHidden);
      await setVisibility('visible');
      await expect.poll(() => overviews.length, { timeout: 30_000 }).toBeGreaterThan(whileHidden);
    } finally {
      await page.close();
      await outboxer.stop();
      await dashboard.close();
    }
  });
});
