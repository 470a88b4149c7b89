/** The dashboard's options, checked once when it is created into a frozen, resolved object. */
import type { FoundMessage } from '../core/api.js';
import { invalidOption, rejectUnknownKeys } from '../core/options.js';

/**
 * What a request asks to do, as the `authorize` hook is told: `view` for every read (the page and
 * the JSON API), one name per change.
 */
export type DashboardAction = 'view' | 'retry' | 'discard' | 'redrive';

/** What `redact` shows instead of a message's own fields; a field left out is shown as it is. */
export interface Redacted {
  payload?: unknown;
  headers?: Record<string, string>;
  lastError?: string | null;
}

/** Options of {@link createDashboard}. */
export interface DashboardOptions {
  /**
   * The path prefix the dashboard is mounted under, such as `'/admin/outbox'`: the page is served
   * at the prefix and the API below it. Default `'/'`.
   */
  basePath?: string;
  /**
   * Default false: a read-only dashboard, which refuses every change (405). True lets operators
   * retry, discard and redrive, each still subject to `authorize` and the same-origin checks.
   */
  mutations?: boolean;
  /**
   * Asked before every request with what it would do; false (or a promise of false) refuses it
   * with 403. Default: every request is allowed, so put the dashboard behind your own
   * authentication, or check it here (a session cookie, a header set by your proxy…).
   *
   * @example
   * authorize: (request, action) => action === 'view' || isAdmin(request.headers.get('cookie'))
   */
  authorize?: (request: Request, action: DashboardAction) => boolean | Promise<boolean>;
  /**
   * Replaces what the page shows of a message (its payload, headers or last error) before it
   * leaves the server. Default: shown as stored. With a `redact` hook, the blocked groups list
   * leaves out its heads' last errors (they show in the head's detail view, redacted).
   *
   * @example
   * redact: (m) => ({ payload: '[redacted]', headers: { ...m.headers, authorization: '***' } })
   */
  redact?: (message: FoundMessage) => Redacted;
  /** The outboxes shown, by name. Default: every outbox of the instance. */
  outboxes?: string[];
  /** Milliseconds between the page's refreshes, 500 to 60000. Default 2000. */
  refreshInterval?: number;
  /** The page's title. Default `'outboxer'`. */
  title?: string;
}

export interface ResolvedDashboardOptions {
  /** Without a trailing slash: `''` at the root, `'/admin/outbox'` otherwise. */
  readonly basePath: string;
  readonly mutations: boolean;
  readonly authorize: ((request: Request, action: DashboardAction) => boolean | Promise<boolean>) | undefined;
  readonly redact: ((message: FoundMessage) => Redacted) | undefined;
  readonly outboxes: readonly string[] | undefined;
  readonly refreshInterval: number;
  readonly title: string;
}

const KEYS = ['basePath', 'mutations', 'authorize', 'redact', 'outboxes', 'refreshInterval', 'title'];

export function resolveDashboardOptions(raw: unknown): ResolvedDashboardOptions {
  if (raw === undefined) raw = {};
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw invalidOption('', 'an options object such as { basePath: "/admin/outbox" }', raw);
  }
  rejectUnknownKeys('', raw, KEYS);
  const o = raw as Record<string, unknown>;
  return Object.freeze({
    basePath: basePath(o.basePath),
    mutations: flag('mutations', o.mutations),
    authorize: hook<ResolvedDashboardOptions['authorize']>(
      'authorize',
      o.authorize,
      'a function (request, action) => boolean | Promise<boolean>',
    ),
    redact: hook<ResolvedDashboardOptions['redact']>(
      'redact',
      o.redact,
      'a function (message) => { payload?, headers?, lastError? }',
    ),
    outboxes: names(o.outboxes),
    refreshInterval: interval(o.refreshInterval),
    title: title(o.title),
  });
}

function basePath(value: unknown): string {
  if (value === undefined || value === '/' || value === '') return '';
  if (
    typeof value !== 'string' ||
    !/^(\/[A-Za-z0-9._~-]+)+\/?$/.test(value) ||
    value.split('/').some((segment) => segment === '.' || segment === '..')
  ) {
    throw invalidOption(
      'basePath',
      "a path such as '/admin/outbox': segments of letters, digits and . _ ~ - after each / (not . or ..)",
      value,
    );
  }
  return value.endsWith('/') ? value.slice(0, -1) : value;
}

function flag(path: string, value: unknown): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') throw invalidOption(path, 'true or false', value);
  return value;
}

function hook<F>(path: string, value: unknown, accepted: string): F | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'function') throw invalidOption(path, accepted, value);
  return value as F;
}

function names(value: unknown): readonly string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length === 0 || !value.every((v) => typeof v === 'string')) {
    throw invalidOption('outboxes', 'a non-empty array of outbox names', value);
  }
  return Object.freeze([...new Set(value as string[])]);
}

function interval(value: unknown): number {
  if (value === undefined) return 2000;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 500 || value > 60_000) {
    throw invalidOption('refreshInterval', 'an integer from 500 to 60000 (milliseconds)', value);
  }
  return value;
}

function title(value: unknown): string {
  if (value === undefined) return 'outboxer';
  if (typeof value !== 'string' || value.length === 0 || value.length > 100) {
    throw invalidOption('title', 'a string of 1 to 100 characters', value);
  }
  return value;
}
