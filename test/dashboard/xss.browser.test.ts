/**
 * Payloads are attacker-controlled text: markup published as a payload, header, group key, type
 * and error message renders as text in the page, fires no dialog and injects no element.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { fixtures, publishInTransaction, type Fixture } from '../support/databases.js';
import { openBrowser, relayedOutboxer, see, serveDashboard } from './support.js';

const ATTACKS = [
  '<script>window.__xss = 1; alert(1)</script>',
  '"><img src=x onerror="window.__xss = 2; alert(2)">',
  '\'><svg onload="window.__xss = 3; alert(3)">',
  '<iframe src="javascript:alert(4)"></iframe>',
  '</pre></td></tr></table><b id="injected">bold</b>',
  '<a href="javascript:alert(6)" id="injected-link">click</a>',
  '<style>body { display: none }</style><div id="injected-div"></div>',
];

describe.each(fixtures)('markup from the database renders as text on $name', ({ make }) => {
  let fixture: Fixture;
  let browser: Awaited<ReturnType<typeof openBrowser>>;
  beforeAll(async () => {
    [fixture, browser] = await Promise.all([make(), openBrowser()]);
  });
  afterAll(async () => {
    await browser?.close();
    await fixture?.close();
  });

  test('in the blocked groups, the message list and the detail view', async () => {
    const { outboxer } = relayedOutboxer(fixture, { orders: { onDead: 'park', maxAttempts: 1 } }, 'dash_xss');
    await outboxer.migrate();
    await publishInTransaction(
      fixture,
      outboxer,
      ATTACKS.map((attack) => ({
        outbox: 'orders',
        payload: { fail: true, error: attack, note: attack },
        groupKey: attack,
        type: attack.slice(0, 100),
        headers: { 'x-attack': attack, note: attack },
      })),
    );
    await outboxer.start();
    await expect
      .poll(async () => (await outboxer.counts('orders')).dead, { timeout: 30_000 })
      .toBe(ATTACKS.length);

    const dashboard = await serveDashboard(outboxer, { mutations: true });
    const page = await browser.context.newPage();
    const dialogs: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    try {
      await page.goto(dashboard.url);
      const blocked = page.locator('#blocked tbody tr');
      await see.count(blocked, ATTACKS.length);
      const keys = await page.locator('#blocked tbody tr td:first-child').allTextContents();
      expect(keys.sort()).toEqual([...ATTACKS].sort());
      const errors = await page.locator('#blocked tbody tr td.error').allTextContents();
      expect(errors.sort()).toEqual(ATTACKS.map((a) => `Error: ${a}`).sort());

      await page.selectOption('#message-status', 'dead');
      const rows = page.locator('#messages tbody tr[data-id]');
      await see.count(rows, ATTACKS.length);
      const types = await page.locator('#messages tbody tr[data-id] td:nth-child(4)').allTextContents();
      expect(types.sort()).toEqual(ATTACKS.map((a) => a.slice(0, 100)).sort());

      // The search box takes markup as a search term, and finds the group by its text.
      await page.fill('#blocked-search', ATTACKS[1]!);
      await see.count(blocked, 1);
      await page.fill('#blocked-search', '');

      for (let i = 0; i < ATTACKS.length; i += 1) {
        await rows.nth(i).click();
        await see.visible(page.locator('#detail'));
        const attack = await rows.nth(i).locator('td').nth(2).textContent();
        await see.contains(page.locator('#detail-payload'), JSON.stringify(attack).slice(1, -1));
        await see.contains(page.locator('#detail-headers'), '"x-attack"');
        await see.text(page.locator('#detail-error'), `Error: ${attack}`);
        await see.contains(page.locator('#detail-fields'), attack!);
        await page.click('#detail-close');
      }

      // Nothing ran and nothing was injected: one script (the page's own), no foreign element.
      expect(dialogs).toEqual([]);
      expect(await page.evaluate('window.__xss')).toBeUndefined();
      expect(await page.locator('script').count()).toBe(1);
      for (const selector of [
        'img',
        'iframe',
        'svg [onload]',
        '#injected',
        '#injected-link',
        '#injected-div',
        'style + div',
        'b',
      ]) {
        expect(await page.locator(selector).count(), selector).toBe(0);
      }
      expect(await page.locator('style').count()).toBe(1);
      await see.visible(page.locator('main'));
    } finally {
      await page.close();
      await outboxer.stop();
      await dashboard.close();
    }
  });
});
