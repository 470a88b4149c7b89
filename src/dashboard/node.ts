/**
 * The dashboard in node:http, Express and Fastify: thin wrappers that turn the framework's request
 * into a web `Request` for the handler and write its `Response` back. Structural types only: no
 * dependency on any framework. (Hono speaks `Request` already: `(c) => dashboard(c.req.raw)`.)
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DashboardHandler } from './handler.js';

/** The largest body forwarded to the handler, in bytes (it refuses more anyway). */
const MAX_BODY = 256 * 1024;

/** What the wrappers read of a node request; Express adds `originalUrl` and, after a body parser, `body`. */
type NodeRequest = IncomingMessage & { originalUrl?: string; body?: unknown };

/**
 * A node:http request listener (also an Express or Connect middleware) that serves the dashboard.
 * Requests outside its `basePath` go to `next` when there is one (Express), or get a 404.
 *
 * @example
 * createServer(toNodeHandler(createDashboard(outboxer))).listen(8080);
 * // Express: app.use(toNodeHandler(createDashboard(outboxer, { basePath: '/admin/outbox' })));
 */
export function toNodeHandler(
  handler: DashboardHandler,
): (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void) => void {
  return (req, res, next) => {
    const path = ((req as NodeRequest).originalUrl ?? req.url ?? '/').split('?')[0]!;
    const { basePath } = handler;
    if (next !== undefined && path !== basePath && !path.startsWith(`${basePath}/`)) return next();
    serve(handler, req as NodeRequest, res).catch((error: unknown) => {
      if (next !== undefined) next(error);
      else if (!res.headersSent) res.writeHead(500).end();
      else res.destroy();
    });
  };
}

/** An Express middleware: `app.use(expressDashboard(dashboard))`. The same as {@link toNodeHandler}. */
export const expressDashboard = toNodeHandler;

/** What the Fastify wrapper uses of a Fastify request. */
export interface FastifyRequestLike {
  readonly raw: IncomingMessage;
  readonly body?: unknown;
}
/** What the Fastify wrapper uses of a Fastify reply. */
export interface FastifyReplyLike {
  code(status: number): FastifyReplyLike;
  headers(values: Record<string, string>): FastifyReplyLike;
  send(payload: unknown): FastifyReplyLike;
}

/**
 * A Fastify route handler: `fastify.all('/admin/outbox', h)` and `fastify.all('/admin/outbox/*', h)`
 * with `basePath: '/admin/outbox'`. Fastify has parsed a JSON body already; it is passed on.
 */
export function fastifyDashboard(
  handler: DashboardHandler,
): (request: FastifyRequestLike, reply: FastifyReplyLike) => Promise<FastifyReplyLike> {
  return async (request, reply) => {
    const response = await handler(toRequest(request.raw, request.body));
    const headers: Record<string, string> = {};
    response.headers.forEach((value, name) => (headers[name] = value));
    return reply
      .code(response.status)
      .headers(headers)
      .send(Buffer.from(await response.arrayBuffer()));
  };
}

async function serve(handler: DashboardHandler, req: NodeRequest, res: ServerResponse): Promise<void> {
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  let body: unknown = req.body;
  if (hasBody && body === undefined && !req.readableEnded) body = await readStream(req);
  const response = await handler(toRequest(req, body));
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => (headers[name] = value));
  res.writeHead(response.status, headers);
  res.end(req.method === 'HEAD' ? undefined : Buffer.from(await response.arrayBuffer()));
}

/** A web `Request` for a node request, with its body: raw bytes, or what a body parser made of it. */
function toRequest(req: NodeRequest, body: unknown): Request {
  const encrypted = (req.socket as { encrypted?: boolean } | undefined)?.encrypted === true;
  const url = new URL(
    req.originalUrl ?? req.url ?? '/',
    `${encrypted ? 'https' : 'http'}://${req.headers.host ?? 'localhost'}`,
  );
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || name.startsWith(':')) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  const method = req.method ?? 'GET';
  if (method === 'GET' || method === 'HEAD' || body === undefined)
    return new Request(url, { method, headers });
  const bytes =
    body instanceof Uint8Array ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  headers.delete('content-length');
  return new Request(url, { method, headers, body: bytes });
}

function readStream(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        reject(new Error('request body too large'));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}
