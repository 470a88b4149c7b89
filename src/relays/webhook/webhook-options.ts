import { OutboxerError } from '../../core/errors.js';
import type { Envelope } from '../../core/relay.js';
import { decodeSecret, SECRET_BYTES, secretRequirement } from './webhook-signature.js';
import {
  FRAMING_HEADERS,
  headerProblem,
  maySecret,
  parseTarget,
  type Target,
  type WebhookBody,
} from './webhook-request.js';

export type { WebhookBody } from './webhook-request.js';

/** The request the relay hands to `fetch`: plain values that every fetch implementation takes. */
export interface WebhookRequestInit {
  readonly method: 'POST';
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly redirect: 'manual';
  readonly signal: AbortSignal;
}

/** The part of a fetch `Response` the relay reads. A web stream and a Node stream both fit `body`. */
export interface WebhookResponse {
  readonly status: number;
  readonly statusText?: string;
  readonly headers: { get(name: string): string | null };
  readonly body?: AsyncIterable<Uint8Array> | null;
}

/**
 * A `fetch`: the global one (default), undici's with a `dispatcher` for a proxy or mTLS, or any
 * function with this shape.
 *
 * @example
 * import { ProxyAgent, fetch as undiciFetch } from 'undici';
 * const dispatcher = new ProxyAgent('http://proxy.internal:3128');
 * webhookRelay({ url, fetch: (url, init) => undiciFetch(url, { ...init, dispatcher }) });
 */
export type WebhookFetch = (url: string, init: WebhookRequestInit) => Promise<WebhookResponse>;

/**
 * Options of {@link webhookRelay}. Only `url` is required.
 *
 * @example
 * webhookRelay({ url: 'https://partner.example/hooks', secret: [current, previous], concurrency: 4 });
 */
export interface WebhookRelayOptions {
  /**
   * Where to POST: one URL for the outbox, or a function choosing one per message. `http:` or
   * `https:`. Credentials in the URL (`https://user:pass@host/`) are sent as Basic authorization.
   */
  url: string | URL | ((envelope: Envelope) => string | URL);
  /**
   * Signing secret(s), `whsec_<base64 of 24 to 64 random bytes>`. Several while rotating: each
   * request then carries one signature per secret. Default: none (no `webhook-signature` header).
   */
  secret?: string | readonly string[];
  /** Headers added to every request (an `authorization`, an API key…). Default none. */
  headers?: Readonly<Record<string, string>>;
  /** The request body. Default `'standard'`. See {@link WebhookBody}. */
  body?: WebhookBody;
  /** Milliseconds a request may take, response body included. Default 10000. */
  timeout?: number;
  /**
   * Requests in flight at once, across different ordering keys; one key never has more than one.
   * Default 1.
   */
  concurrency?: number;
  /**
   * 4xx statuses to retry rather than reject for good, besides 408 and 429 (which always are).
   * Default none. E.g. `[404, 409]` for a receiver that answers 404 while it deploys.
   */
  retryStatuses?: readonly number[];
  /** Longest `Retry-After` honoured, in milliseconds; longer waits are cut to it. 0 ignores the header. Default 3600000 (1 hour). */
  maxRetryAfter?: number;
  /** The fetch to use. Default `globalThis.fetch`. */
  fetch?: WebhookFetch;
  /** Shown in logs and telemetry. Default `'webhook'`. */
  name?: string;
}

/** The options after validation. */
export interface ResolvedWebhookOptions {
  readonly name: string;
  readonly target: Target | ((envelope: Envelope) => string | URL);
  readonly keys: readonly Buffer[];
  /** Lower-case names. */
  readonly headers: ReadonlyMap<string, string>;
  readonly body: WebhookBody;
  readonly timeout: number;
  readonly concurrency: number;
  readonly retryStatuses: ReadonlySet<number>;
  readonly maxRetryAfter: number;
  readonly fetch: WebhookFetch;
  /** Strings that must never appear in an error message: secrets and header values. */
  readonly sensitive: readonly string[];
}

const KEYS = [
  'url',
  'secret',
  'headers',
  'body',
  'timeout',
  'concurrency',
  'retryStatuses',
  'maxRetryAfter',
  'fetch',
  'name',
];

function invalid(option: string, accepted: string, got: string): OutboxerError {
  return new OutboxerError(
    'INVALID_OPTIONS',
    `webhookRelay option "${option}" must be ${accepted}; got ${got}.`,
  );
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return 'an array';
  if (value === null || typeof value !== 'object') return String(value);
  return 'an object';
}

function integer(option: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw invalid(option, `an integer from ${min} to ${max}`, describe(value));
  }
  return value;
}

/** Validates the options once, into a frozen object. Values that may be secret are never echoed. */
export function resolveWebhookOptions(options: WebhookRelayOptions): ResolvedWebhookOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new OutboxerError(
      'INVALID_OPTIONS',
      'webhookRelay needs an options object, e.g. webhookRelay({ url: "https://example.com/hooks" }).',
    );
  }
  const unknown = Object.keys(options).find((key) => !KEYS.includes(key));
  if (unknown !== undefined)
    throw new OutboxerError(
      'INVALID_OPTIONS',
      `Unknown webhookRelay option "${unknown}". Known options: ${KEYS.join(', ')}.`,
    );
  const sensitive: string[] = [];
  const keys = resolveSecrets(options.secret, sensitive);
  const headers = resolveHeaders(options.headers, sensitive);
  const target = resolveUrl(options.url, headers);
  if (typeof target !== 'function') sensitive.push(...target.sensitive);
  // The global is looked up per request, so that tools patching globalThis.fetch (msw, nock) apply.
  const fetchImpl: WebhookFetch | undefined =
    options.fetch ??
    (typeof globalThis.fetch === 'function' ? (url, init) => globalThis.fetch(url, init) : undefined);
  if (typeof fetchImpl !== 'function')
    throw invalid(
      'fetch',
      'a fetch function (globalThis.fetch is missing on this runtime)',
      describe(options.fetch),
    );
  const name = options.name ?? 'webhook';
  if (typeof name !== 'string' || name.length === 0)
    throw invalid('name', 'a non-empty string', describe(name));
  return Object.freeze({
    name,
    target,
    keys,
    headers,
    body: resolveBody(options.body),
    timeout: integer('timeout', options.timeout, 10_000, 1, 600_000),
    concurrency: integer('concurrency', options.concurrency, 1, 1, 256),
    retryStatuses: resolveRetryStatuses(options.retryStatuses),
    maxRetryAfter: integer('maxRetryAfter', options.maxRetryAfter, 3_600_000, 0, 86_400_000),
    fetch: fetchImpl,
    sensitive: Object.freeze([...new Set(sensitive)]),
  });
}

function resolveUrl(url: unknown, headers: ReadonlyMap<string, string>): ResolvedWebhookOptions['target'] {
  if (typeof url === 'function') return url as (envelope: Envelope) => string | URL;
  if (typeof url !== 'string' && !(url instanceof URL)) {
    throw invalid(
      'url',
      'an http(s) URL (string or URL) or a function of the message returning one',
      describe(url),
    );
  }
  const target = parseTarget(url);
  // The URL itself is not echoed: it may carry a password or a token.
  if (typeof target === 'string') throw invalid('url', 'an absolute http: or https: URL', target);
  if (target.authorization !== undefined && headers.has('authorization')) {
    throw invalid(
      'url',
      'a URL without credentials when headers.authorization is set (use one or the other)',
      'both',
    );
  }
  return target;
}

function resolveSecrets(secret: unknown, sensitive: string[]): Buffer[] {
  if (secret === undefined) return [];
  const secrets = typeof secret === 'string' ? [secret] : secret;
  if (!Array.isArray(secrets) || secrets.length === 0)
    throw invalid(
      'secret',
      'a "whsec_…" string or a non-empty array of them',
      Array.isArray(secret) ? 'an empty array' : describe(secret),
    );
  return secrets.map((s: unknown, i) => {
    const key = decodeSecret(s, { requirePrefix: true, minBytes: SECRET_BYTES.min });
    const option = typeof secret === 'string' ? 'secret' : `secret[${i}]`;
    if (!Buffer.isBuffer(key)) {
      throw new OutboxerError(
        'INVALID_OPTIONS',
        `webhookRelay option "${option}" must be ${secretRequirement(SECRET_BYTES.min)}; ${key.problem}. Generate one with "whsec_" + crypto.randomBytes(32).toString("base64").`,
      );
    }
    sensitive.push(s as string, (s as string).slice('whsec_'.length));
    return key;
  });
}

// Headers that describe the request and never carry a credential: scrubbing their values would
// turn every "application/json" in a receiver's answer into "***".
const DESCRIPTIVE_HEADERS: ReadonlySet<string> = new Set([
  'accept',
  'accept-encoding',
  'accept-language',
  'content-language',
  'content-type',
  'user-agent',
]);

function resolveHeaders(headers: unknown, sensitive: string[]): Map<string, string> {
  const resolved = new Map<string, string>();
  if (headers === undefined) return resolved;
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers))
    throw invalid('headers', 'an object of header names to string values', describe(headers));
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (typeof value !== 'string') throw invalid(`headers.${name}`, 'a string', typeof value);
    const problem = headerProblem(name, value);
    if (problem !== undefined)
      throw invalid(`headers.${name}`, 'a valid HTTP header', `${problem} (value not shown)`);
    if (FRAMING_HEADERS.has(lower) || lower.startsWith('webhook-') || lower.startsWith('outboxer-')) {
      throw invalid(
        `headers.${name}`,
        'a header the relay does not set itself (not webhook-*, outboxer-*, content-length or a hop-by-hop header)',
        'a reserved name',
      );
    }
    resolved.set(lower, value.trim());
    // Header values are often tokens; short ones are left alone so that "json" or "1" stay readable.
    if (!DESCRIPTIVE_HEADERS.has(lower) && maySecret(value.trim())) sensitive.push(value.trim());
  }
  return resolved;
}

function resolveBody(body: unknown): WebhookBody {
  if (body === undefined) return 'standard';
  if (body === 'standard' || body === 'payload' || typeof body === 'function') return body as WebhookBody;
  throw invalid(
    'body',
    "'standard', 'payload' or a function of the message returning the JSON body",
    describe(body),
  );
}

function resolveRetryStatuses(statuses: unknown): ReadonlySet<number> {
  if (statuses === undefined) return new Set();
  if (!Array.isArray(statuses) || !statuses.every((s) => Number.isInteger(s) && s >= 400 && s <= 499)) {
    throw invalid(
      'retryStatuses',
      'an array of 4xx status codes (5xx, 408 and 429 are always retried)',
      describe(statuses),
    );
  }
  return new Set(statuses as number[]);
}
