import Fastify from 'fastify';
import { createDashboard, fastifyDashboard } from 'outboxer/dashboard';
import { outboxer } from './outboxer.js';

const app = Fastify();
const dashboard = fastifyDashboard(createDashboard(outboxer, { basePath: '/admin/outbox' }));
app.all('/admin/outbox', dashboard);
app.all('/admin/outbox/*', dashboard);
await app.listen({ port: 8080 });
