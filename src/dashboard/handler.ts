/**
 * The dashboard as a fetch-style handler, `(request: Request) => Promise<Response>`: the page at
 * the base path, the JSON API below it, and the security checks in front of both.
 *
 * Security: every request is put to `authorize(request, action)`; a GET never changes anything;
 * a change (POST only) needs `mutations: true`, a JSON body, an `Origin` (when the browser sends
 * one) of the dashboard's own host and no cross-site `Sec-Fetch-Site`, and the dashboard's token in
 * the `x-outboxer-token` header, which only a page of the same origin can read from the API
 * (nothing answers a cross-origin preflight).
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Outboxer } from '../core/outboxer.js';
import { describeError, isOutboxerError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { channels, emit } from '../core/telemetry.js';
import { BLOCKED_SHOWN, DashboardApi, type DashboardSource } from './api.js';
import { resolveDashboardOptions, type DashboardAction, type DashboardOptions } from './options.js';
import { renderPage } from './page.js';

/** A request handler of the web standard: give it a `Request`, get a `Response`. */
export interface DashboardHandler {
  (request: Request): Promise<Response>;
  /** The resolved `basePath`: `''` at the root, `'/admin/outbox'` otherwise. */
  readonly basePath: string;
}

/** The header a change carries the token in. */
export const TOKEN_HEADER = 'x-outboxer-token';
/** The largest request body read, in bytes: 10,000 ids and some. */
const MAX_BODY = 256 * 1024;

const COMMON_HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-resource-policy': 'same-origin',
};

/**
 * Creates the dashboard of an `Outboxer`: a handler that serves the page under `basePath` and the
 * JSON API it polls. Read-only unless `mutations: true`. Options are checked here, once.
 *
 * @example
 * import { createServer } from 'node:http';
 * import { createDashboard, toNodeHandler } from 'outboxer/dashboard';
 *
 * const dashboard = createDashboard(outboxer, { basePath: '/admin/outbox', authorize: isAdmin });
 * createServer(toNodeHandler(dashboard)).listen(8080);
 */
export function createDashboard(
  outboxer: Pick<Outboxer<never, boolean>, keyof DashboardSource>,
  options: DashboardOptions = {},
): DashboardHandler {
  const resolved = resolveDashboardOptions(options);
  const api = new DashboardApi(outboxer, resolved);
  const token = randomBytes(24).toString('base64url');
  const { basePath } = resolved;

  const refuse = (request: Request, action: DashboardAction, status: number, reason: string) => {
    emit(channels.dashboardRefused, () => ({
      instance: outboxer.settings.name,
      action,
      reason,
      path: new URL(request.url).pathname,
    }));
    return json({ error: reason }, status, status === 405 ? { allow: 'GET' } : {});
  };

  const handle = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    const path = url.pathname;
    if (path !== basePath && !path.startsWith(`${basePath}/`)) return json({ error: 'not found' }, 404);
    const route = path.slice(basePath.length) || '/';
    const change = CHANGES[route];
    try {
      if (change !== undefined) {
        if (request.method !== 'POST') return refuse(request, change, 405, `${route} takes POST only`);
        if (!resolved.mutations) {
          return refuse(request, change, 405, 'this dashboard is read-only (mutations: false)');
        }
        const forged = checkSameOrigin(request, url, token);
        if (forged !== undefined) return refuse(request, change, 403, forged);
        if (!(await allowed(resolved.authorize, request, change))) {
          return refuse(request, change, 403, 'not authorized');
        }
        const body = await readBody(request);
        if (body === undefined) return json({ error: 'the body must be a JSON object' }, 400);
        const outbox = api.checkOutbox(body.outbox);
        if (change === 'discard') return json(await api.discard(outbox, ids(body.ids)));
        const group = body.group;
        if (group !== undefined && (typeof group !== 'string' || group === '')) {
          return json({ error: '"group" must be a group key' }, 400);
        }
        if (change === 'redrive' && group === undefined)
          return json({ error: 'redrive takes a "group"' }, 400);
        return json(
          await api.retry(change, outbox, group === undefined ? { ids: ids(body.ids) } : { group }),
        );
      }
      if (request.method !== 'GET' && request.method !== 'HEAD')
        return json({ error: 'GET only' }, 405, { allow: 'GET' });
      if (!(await allowed(resolved.authorize, request, 'view')))
        return refuse(request, 'view', 403, 'not authorized');
      switch (route) {
        case '/':
          return page(resolved.title, basePath, resolved.refreshInterval);
        case '/api/overview':
          return json({ ...(await api.overview()), mutations: resolved.mutations, token });
        case '/api/blocked': {
          const outbox = api.checkOutbox(url.searchParams.get('outbox'));
          const prefix = url.searchParams.get('prefix') ?? '';
          if (prefix.length > 1000) throw new BadRequest('"prefix" takes at most 1000 characters');
          const groups = await api.blocked(outbox, prefix === '' ? undefined : prefix);
          return json({ groups, capped: groups.length === BLOCKED_SHOWN });
        }
        case '/api/messages':
          return json(await api.messages(api.checkOutbox(url.searchParams.get('outbox')), messageQuery(url)));
        case '/api/message': {
          const found = await api.message(api.checkOutbox(url.searchParams.get('outbox')), id(url));
          return found === undefined ? json({ error: 'no such pending or dead message' }, 404) : json(found);
        }
        default:
          return json({ error: 'not found' }, 404);
      }
    } catch (error) {
      return failure(error, outboxer.settings.logger, request);
    }
  };
  return Object.assign(handle, { basePath });
}

const CHANGES: Record<string, Exclude<DashboardAction, 'view'>> = {
  '/api/retry': 'retry',
  '/api/redrive': 'redrive',
  '/api/discard': 'discard',
};

async function allowed(
  authorize: ((request: Request, action: DashboardAction) => boolean | Promise<boolean>) | undefined,
  request: Request,
  action: DashboardAction,
): Promise<boolean> {
  return authorize === undefined || (await authorize(request, action)) === true;
}

/** Why a change does not come from the dashboard's own page, or `undefined` when it does. */
function checkSameOrigin(request: Request, url: URL, token: string): string | undefined {
  const site = request.headers.get('sec-fetch-site');
  if (site !== null && site !== 'same-origin') return `cross-site request refused (Sec-Fetch-Site: ${site})`;
  const origin = request.headers.get('origin');
  if (origin !== null) {
    let host: string | undefined;
    try {
      host = new URL(origin).host;
    } catch {
      host = undefined;
    }
    if (host !== url.host) return 'cross-origin request refused (Origin does not match the host)';
  }
  if (!(request.headers.get('content-type') ?? '').startsWith('application/json')) {
    return 'a change must be sent as application/json';
  }
  const given = Buffer.from(request.headers.get(TOKEN_HEADER) ?? '');
  const expected = Buffer.from(token);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return `missing or wrong ${TOKEN_HEADER} header (the page reads it from the API)`;
  }
  return undefined;
}

async function readBody(request: Request): Promise<Record<string, unknown> | undefined> {
  const length = Number(request.headers.get('content-length') ?? 0);
  if (length > MAX_BODY) return undefined;
  const text = await request.text();
  if (text.length > MAX_BODY) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

class BadRequest extends Error {}

function ids(value: unknown): number[] {
  if (!Array.isArray(value) || value.length === 0 || !value.every((v) => Number.isSafeInteger(v) && v > 0)) {
    throw new BadRequest('"ids" must be a non-empty array of message ids');
  }
  return value as number[];
}

function id(url: URL): number {
  const text = url.searchParams.get('id') ?? '';
  if (!/^\d{1,15}$/.test(text) || Number(text) < 1) throw new BadRequest('"id" must be a message id');
  return Number(text);
}

function messageQuery(url: URL): Parameters<DashboardApi['messages']>[1] {
  const q = url.searchParams;
  const status = q.get('status');
  if (status !== 'pending' && status !== 'dead') throw new BadRequest('"status" must be pending or dead');
  const text = (name: string) => {
    const value = q.get(name);
    return value === null || value === '' ? {} : { [name === 'group' ? 'groupKey' : name]: value };
  };
  const number = (name: string, key: string) => {
    const value = q.get(name);
    if (value === null || value === '') return {};
    if (!/^\d{1,15}$/.test(value)) throw new BadRequest(`"${name}" must be a whole number`);
    return { [key]: Number(value) };
  };
  return {
    status,
    ...text('group'),
    ...text('type'),
    ...text('error'),
    ...number('after', 'afterId'),
    ...number('limit', 'limit'),
  };
}

function failure(error: unknown, logger: Logger, request: Request): Response {
  if (error instanceof BadRequest) return json({ error: error.message }, 400);
  const fault =
    !isOutboxerError(error) || !['UNKNOWN_OUTBOX', 'INVALID_OPTIONS', 'BATCH_TOO_LARGE'].includes(error.code);
  // The page shows little of a failure (below); the operator finds the rest in the server's log.
  if (fault) {
    logger.error('outboxer: the dashboard could not answer a request', {
      path: new URL(request.url).pathname,
      error: describeError(error, 500),
    });
  }
  if (isOutboxerError(error)) {
    const status =
      error.code === 'UNKNOWN_OUTBOX'
        ? 404
        : ['INVALID_OPTIONS', 'BATCH_TOO_LARGE'].includes(error.code)
          ? 400
          : 500;
    // outboxer's own messages say what to fix (a missing table, a configuration mismatch).
    return json({ error: error.message, code: error.code }, status);
  }
  // Nothing of an unexpected error (a driver's message may name hosts or users) leaves the server.
  return json({ error: 'the request failed' }, 500);
}

function json(value: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(value), {
    status,
    headers: { ...COMMON_HEADERS, 'content-type': 'application/json; charset=utf-8', ...headers },
  });
}

function page(title: string, basePath: string, refreshInterval: number): Response {
  const nonce = randomBytes(16).toString('base64');
  return new Response(renderPage({ title, basePath, refreshInterval, nonce }), {
    headers: {
      ...COMMON_HEADERS,
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
    },
  });
}
