/**
 * A request the dashboard cannot answer (here: its database connection is closed) gets a 500 that
 * says nothing of the cause, and the cause goes to the instance's logger for the operator.
 */
import Database from 'better-sqlite3';
import { expect, test } from 'vitest';
import { Outboxer, functionRelay, type Logger } from 'outboxer';
import { betterSqlite3 } from 'outboxer/better-sqlite3';
import { createDashboard } from '../../src/dashboard/index.js';

test('an unexpected failure answers a bare 500 and is logged with its cause', async () => {
  const errors: Array<[string, Record<string, unknown> | undefined]> = [];
  const logger: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: () => undefined,
    error: (message, context) => void errors.push([message, context]),
  };
  const db = new Database(':memory:');
  const outboxer = new Outboxer({
    database: betterSqlite3(db),
    testing: 'manual',
    logger,
    outboxes: { orders: { relay: functionRelay(async () => undefined) } },
  });
  await outboxer.migrate();
  const dashboard = createDashboard(outboxer, { basePath: '/admin' });
  expect((await dashboard(new Request('http://app.example/admin/api/overview'))).status).toBe(200);

  db.close();
  const response = await dashboard(new Request('http://app.example/admin/api/overview'));
  expect(response.status).toBe(500);
  expect(await response.json()).toEqual({ error: 'the request failed' });
  expect(errors).toEqual([
    [
      'outboxer: the dashboard could not answer a request',
      { path: '/admin/api/overview', error: expect.stringMatching(/not open/) },
    ],
  ]);
});
