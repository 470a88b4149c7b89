import express from 'express';
import { createDashboard, expressDashboard } from 'outboxer/dashboard';
import { isAdmin, outboxer } from './outboxer.js';

const app = express();
// Mounted with its full path as basePath; other requests go on to the next middleware.
app.use(
  expressDashboard(
    createDashboard(outboxer, {
      basePath: '/admin/outbox',
      mutations: true,
      authorize: (request, action) => action === 'view' || isAdmin(request),
    }),
  ),
);
app.listen(8080);
