import { PermanentError, redactCredentials } from '../../core/errors.js';
import type { Envelope } from '../../core/relay.js';
import { OUTBOXER_HEADERS, standardHeaders } from '../shared/headers.js';
import type { WebhookBody } from './webhook-options.js';

/** A destination URL, split into what is sent, what is shown and what is secret. */
export interface Target {
  /** The URL without credentials: fetch refuses URLs that carry them. */
  readonly href: string;
  /** Safe for error messages: origin and path, no credentials, no query (it often holds a token). */
  readonly display: string;
  /** `Basic …` made from the URL's credentials, if it had any. */
  readonly authorization: string | undefined;
  /** The credentials and the authorization value, to scrub from error messages. */
  readonly sensitive: readonly string[];
}

/** Parses an http(s) URL, or returns what is wrong with it (without echoing it: it may hold secrets). */
export function parseTarget(value: string | URL): Target | string {
  let url: URL;
  try {
    url = new URL(String(value));
  } catch {
    return 'something that is not an absolute URL (not shown)';
  }
  // Not even the scheme is shown: "user:password" parses as a URL whose scheme is the user name.
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return 'a URL whose scheme is not http: or https: (not shown)';
  const display = `${url.origin}${url.pathname}${url.search === '' ? '' : '?…'}`;
  // Query values are often tokens; a receiver that echoes the request must not leak them either.
  const sensitive = [...url.searchParams.values(), url.search.slice(1)];
  let authorization: string | undefined;
  if (url.username !== '' || url.password !== '') {
    const username = safeDecode(url.username);
    const password = safeDecode(url.password);
    const token = Buffer.from(`${username}:${password}`, 'utf8').toString('base64');
    authorization = `Basic ${token}`;
    // A user name alone is often the token itself (https://TOKEN@host/): it is as secret as a password.
    sensitive.push(username, password, url.username, url.password, token);
    url.username = '';
    url.password = '';
  }
  // Short values are left alone: scrubbing "1" or "en" would mangle every message.
  return { href: url.href, display, authorization, sensitive: sensitive.filter((s) => s.length >= 4) };
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** Headers that describe the connection or the body framing: fetch sets them, nobody else may. */
export const FRAMING_HEADERS: ReadonlySet<string> = new Set([
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'expect',
]);

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// Header values are bytes: fetch refuses NUL, CR, LF and characters above U+00FF.
const VALUE = /^[\t\x20-\x7E\x80-\xFF]*$/;

/** What makes `name: value` unsendable over HTTP, or undefined when it is fine. */
export function headerProblem(name: string, value: string): string | undefined {
  if (!TOKEN.test(name)) return 'a name with characters HTTP does not allow';
  if (!VALUE.test(value.trim())) return 'a value with a line break, a NUL or a character above U+00FF';
  return undefined;
}

/**
 * A group key or type as a header value: as it is when it is printable ASCII without `%`,
 * percent-encoded UTF-8 otherwise. Either way `decodeURIComponent(value)` gives it back, and a key
 * such as `customer:Müller` does not make its messages unsendable (HTTP headers are bytes).
 */
export function encodeHeaderText(value: string): string {
  return /^[\x20-\x24\x26-\x7E]*$/.test(value) ? value : encodeURIComponent(value);
}

/** Everything the request carries besides the signature, in increasing precedence. */
export interface HeaderParts {
  readonly envelope: Envelope;
  /** Static headers of the relay, lower-case names. */
  readonly configured: ReadonlyMap<string, string>;
  readonly target: Target;
  /** `webhook-*` headers, set last; a message's own headers of those names are dropped. */
  readonly webhook: Readonly<Record<string, string>>;
}

/**
 * The request headers. Precedence, lowest first: defaults, the message's own headers, outboxer's
 * (`outboxer-id`…), the relay's `headers` option (the operator's configuration beats what a
 * message carries), the URL's credentials, then the `webhook-*` headers.
 *
 * @throws PermanentError when a message header cannot be sent over HTTP: retrying cannot fix it.
 */
export function buildHeaders(parts: HeaderParts): Record<string, string> {
  const headers = new Map<string, string>([
    ['content-type', 'application/json'],
    ['user-agent', 'outboxer-webhook'],
  ]);
  const own = standardHeaders(parts.envelope);
  for (const name of [OUTBOXER_HEADERS.groupKey, OUTBOXER_HEADERS.type]) {
    if (own[name] !== undefined) own[name] = encodeHeaderText(own[name]);
  }
  for (const [name, value] of Object.entries(own)) {
    const lower = name.toLowerCase();
    if (lower.startsWith('webhook-')) continue; // the relay's own: a copied header must not pose as a signature
    const problem =
      headerProblem(name, value) ?? (FRAMING_HEADERS.has(lower) ? 'fetch sets it from the body' : undefined);
    if (problem !== undefined) {
      throw new PermanentError(
        `Message ${parts.envelope.id} has header ${JSON.stringify(name)} that cannot be sent over HTTP (${problem}); remove or encode it when publishing.`,
      );
    }
    headers.set(lower, value.trim());
  }
  for (const [name, value] of parts.configured) headers.set(name, value);
  if (parts.target.authorization !== undefined) headers.set('authorization', parts.target.authorization);
  for (const [name, value] of Object.entries(parts.webhook)) headers.set(name, value);
  return Object.fromEntries(headers);
}

/**
 * The JSON request body.
 *
 * @throws PermanentError when a body function throws or returns something JSON cannot encode.
 */
export function encodeBody(envelope: Envelope, body: WebhookBody): string {
  if (body === 'payload') return JSON.stringify(envelope.payload) ?? 'null';
  if (body === 'standard') {
    return JSON.stringify({
      type: envelope.type,
      timestamp: envelope.insertedAt.toISOString(),
      data: envelope.payload ?? null,
    });
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(body(envelope));
  } catch (error) {
    throw new PermanentError(
      `The body function failed for message ${envelope.id}: ${(error as Error)?.message ?? String(error)}`,
      { cause: error },
    );
  }
  if (json === undefined)
    throw new PermanentError(
      `The body function returned nothing JSON can encode for message ${envelope.id} (undefined, a function or a symbol).`,
    );
  return json;
}

/**
 * Removes secrets from text bound for an error message (and so for `lastError`, logs and
 * telemetry): the given strings, and the password of any `scheme://user:password@` URL.
 */
export function scrub(text: string, sensitive: readonly string[]): string {
  let result = text;
  // Longest first: replacing a short secret inside a longer one would leave the rest of it visible.
  const secrets = [...new Set(sensitive)].filter((s) => s.length > 0).sort((a, b) => b.length - a.length);
  for (const secret of secrets) result = result.split(secret).join('***');
  return redactCredentials(result);
}
