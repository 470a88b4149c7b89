/**
 * What the dashboard tests share: Debian's Chromium driven by playwright-core, a node:http server
 * around a dashboard, and an outboxer whose relay fails on demand.
 */
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { expect } from 'vitest';
import { Outboxer, functionRelay, type Envelope, type OutboxOptions } from 'outboxer';
import { createDashboard, toNodeHandler, type DashboardOptions } from '../../src/dashboard/index.js';
import type { Fixture } from '../support/databases.js';

export const CHROMIUM = '/usr/bin/chromium';

/** A fresh Chromium profile; close() removes it. */
export async function openBrowser(): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), 'outboxer-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1280, height: 900 },
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Listens on 127.0.0.1 with a free port; returns the base URL. */
export async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

export function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** Serves a dashboard of `outboxer` with node:http. */
export async function serveDashboard(outboxer: Outboxer<never, boolean>, options: DashboardOptions = {}) {
  const server = createServer(toNodeHandler(createDashboard(outboxer, options)));
  const origin = await listen(server);
  return { server, origin, url: `${origin}${options.basePath ?? '/'}`, close: () => closeServer(server) };
}

/**
 * An outboxer on the fixture's database with outboxes of the options given, relayed by a relay
 * that fails every message whose payload has `fail: true` while `failing` is on, and records what
 * it delivered.
 */
export function relayedOutboxer(
  fixture: Fixture,
  outboxes: Record<string, Partial<OutboxOptions>>,
  table: string,
) {
  const delivered: Envelope[] = [];
  const control = { failing: true };
  const relay = functionRelay(async (m: Envelope) => {
    const payload = m.payload as { fail?: boolean; error?: string } | null;
    if (control.failing && payload !== null && typeof payload === 'object' && payload.fail === true) {
      throw new Error(payload.error ?? 'refused by the test relay');
    }
    delivered.push(m);
  });
  const outboxer = new Outboxer({
    database: fixture.database,
    logger: false,
    outboxes: Object.fromEntries(
      Object.entries(outboxes).map(([name, o]) => [name, { relay, table, pollInterval: 50, ...o }]),
    ),
  }) as Outboxer<never, boolean>;
  return { outboxer, delivered, control };
}

/** Saves a screenshot into docs/dashboard/ when DASHBOARD_SCREENSHOTS=1 (so normal runs leave the tree alone). */
export async function screenshot(page: Page, name: string): Promise<void> {
  if (process.env.DASHBOARD_SCREENSHOTS !== '1') return;
  const dir = join(import.meta.dirname, '../../docs/dashboard');
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name}.png`), fullPage: false });
}

/**
 * Waits on the page, like Playwright Test's web-first assertions (playwright-core has none): each
 * polls until the condition holds, up to `timeout` (30 s: a loaded machine is slow, never wrong).
 */
export const see = {
  async text(locator: Locator, expected: string, timeout = 30_000): Promise<void> {
    await expect.poll(async () => (await locator.textContent())?.trim(), { timeout }).toBe(expected);
  },
  async contains(locator: Locator, expected: string, timeout = 30_000): Promise<void> {
    await expect
      .poll(async () => (await locator.allTextContents()).join(' '), { timeout })
      .toContain(expected);
  },
  async count(locator: Locator, expected: number, timeout = 30_000): Promise<void> {
    await expect.poll(() => locator.count(), { timeout }).toBe(expected);
  },
  async visible(locator: Locator, timeout = 30_000): Promise<void> {
    await locator.waitFor({ state: 'visible', timeout });
  },
  async className(locator: Locator, pattern: RegExp, timeout = 30_000): Promise<void> {
    await expect.poll(async () => (await locator.getAttribute('class')) ?? '', { timeout }).toMatch(pattern);
  },
};
