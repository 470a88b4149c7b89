import { createServer } from 'node:http';
import { createDashboard, toNodeHandler } from 'outboxer/dashboard';
import { isAdmin, outboxer } from './outboxer.js';

const dashboard = createDashboard(outboxer, {
  basePath: '/admin/outbox',
  mutations: true,
  authorize: (request, action) => action === 'view' || isAdmin(request),
});
createServer(toNodeHandler(dashboard)).listen(8080, '127.0.0.1');
