/**
 * `outboxer/dashboard`: a web page for operators (outboxes, partitions, nodes, blocked groups,
 * pending and dead messages; retry, discard, redrive), as a fetch-style handler with wrappers for
 * node:http, Express and Fastify. See docs/dashboard.md.
 * @packageDocumentation
 */
export { createDashboard, TOKEN_HEADER, type DashboardHandler } from './handler.js';
export {
  toNodeHandler,
  expressDashboard,
  fastifyDashboard,
  type FastifyRequestLike,
  type FastifyReplyLike,
} from './node.js';
export type { DashboardOptions, DashboardAction, Redacted } from './options.js';
export type { DashboardSource } from './api.js';
