import { Hono } from 'hono';
import { createDashboard } from 'outboxer/dashboard';
import { outboxer } from './outboxer.js';

const dashboard = createDashboard(outboxer, { basePath: '/admin/outbox' });
export const app = new Hono();
// Hono hands over the web Request as it is.
app.all('/admin/outbox', (c) => dashboard(c.req.raw));
app.all('/admin/outbox/*', (c) => dashboard(c.req.raw));
