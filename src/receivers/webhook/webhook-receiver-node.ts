/**
 * The webhook receiver in node:http, Express and Fastify, as the dashboard's wrappers: the
 * framework's request becomes the receiver's parts (method, headers, raw body) and its answer is
 * written back. Structural types only: no dependency on any framework. (Hono and other fetch-style
 * routers call the receiver itself: `(c) => receiver(c.req.raw)`.)
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { readNodeLimited, TooLarge } from './webhook-body.js';
import { tooLarge, type WebhookAnswer, type WebhookReceiver } from './webhook-receiver.js';

/**
 * A node:http request listener, also an Express route handler, that answers with `receiver`.
 * Mount it before any body parser: the signature covers the raw bytes (a `Buffer` left in
 * `req.body` by `express.raw()` is used as it is).
 *
 * @example
 * createServer(nodeWebhookReceiver(receiver)).listen(8080);
 * app.post('/webhooks/orders', nodeWebhookReceiver(receiver));   // Express
 */
export function nodeWebhookReceiver(
  receiver: WebhookReceiver,
): (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void) => void {
  return (req, res, next) => {
    answerNode(receiver, req)
      .then((answer) => res.writeHead(answer.status, answer.headers).end(answer.body))
      .catch((error: unknown) => {
        if (next !== undefined) next(error);
        else if (!res.headersSent) res.writeHead(500).end();
        else res.destroy();
      });
  };
}

/** An Express route handler: `app.post('/webhooks/orders', expressWebhookReceiver(receiver))`. The same as {@link nodeWebhookReceiver}. */
export const expressWebhookReceiver = nodeWebhookReceiver;

async function answerNode(receiver: WebhookReceiver, req: IncomingMessage): Promise<WebhookAnswer> {
  const parsed = (req as { body?: unknown }).body;
  let body: Uint8Array | null;
  if (parsed instanceof Uint8Array) body = parsed;
  else if (typeof parsed === 'string') body = Buffer.from(parsed, 'utf8');
  else if (parsed !== undefined || req.readableEnded) body = null;
  else {
    try {
      body = await readNodeLimited(req, receiver.maxBodyBytes);
    } catch (error) {
      if (!(error instanceof TooLarge)) throw error;
      return tooLarge(receiver.maxBodyBytes);
    }
  }
  return receiver.answer({ method: req.method ?? 'GET', headers: req.headers, body });
}

/** What the Fastify plugin uses of a Fastify request. */
export interface FastifyWebhookRequestLike {
  readonly method: string;
  readonly headers: IncomingHttpHeaders;
  readonly body?: unknown;
}
/** What the Fastify plugin uses of a Fastify reply. */
export interface FastifyWebhookReplyLike {
  code(status: number): FastifyWebhookReplyLike;
  headers(values: Record<string, string>): FastifyWebhookReplyLike;
  send(payload?: unknown): FastifyWebhookReplyLike;
}
/** What the Fastify plugin uses of the Fastify instance it is registered in. */
export interface FastifyWebhookInstanceLike {
  removeAllContentTypeParsers(): void;
  addContentTypeParser(
    contentType: string,
    options: { parseAs: 'buffer'; bodyLimit: number },
    parser: (request: unknown, body: Buffer, done: (error: Error | null, body?: Buffer) => void) => void,
  ): void;
  post(
    path: string,
    handler: (request: FastifyWebhookRequestLike, reply: FastifyWebhookReplyLike) => Promise<unknown>,
  ): unknown;
}

/**
 * A Fastify plugin that serves the receiver on `POST path` (default `/`, under the prefix it is
 * registered with). Fastify parses bodies before the handler runs, so the plugin replaces, inside
 * its own encapsulated context only, every content-type parser with one that keeps the raw bytes
 * (and enforces `maxBodyBytes`, answering 413): the rest of the app keeps its JSON parsing.
 *
 * @example
 * await app.register(fastifyWebhookReceiver(receiver), { prefix: '/webhooks/orders' });
 */
export function fastifyWebhookReceiver(
  receiver: WebhookReceiver,
  options: { path?: string } = {},
): (fastify: FastifyWebhookInstanceLike) => Promise<void> {
  const path = options.path ?? '/';
  return async (fastify) => {
    fastify.removeAllContentTypeParsers();
    fastify.addContentTypeParser(
      '*',
      { parseAs: 'buffer', bodyLimit: receiver.maxBodyBytes },
      (_request, body, done) => done(null, body),
    );
    fastify.post(path, async (request, reply) => {
      const body = request.body === undefined ? new Uint8Array(0) : request.body;
      const answer = await receiver.answer({
        method: request.method,
        headers: request.headers,
        body: body instanceof Uint8Array ? body : null,
      });
      return reply
        .code(answer.status)
        .headers(answer.headers)
        .send(answer.body === '' ? undefined : answer.body);
    });
  };
}
