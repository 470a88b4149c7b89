import { PermanentError, redactCredentials } from '../../core/errors.js';
import type { Envelope } from '../../core/relay.js';
import { payloadJson } from '../../core/payload.js';
import { OUTBOXER_HEADERS, standardHeaders } from '../shared/headers.js';

/**
 * What the request body is:
 * - `'standard'`: the Standard Webhooks shape `{ "type", "timestamp", "data" }`, with the message
 *   type (`null` when it has none), when it was published (ISO 8601) and the payload;
 * - `'payload'`: the payload alone;
 * - a function: its return value, encoded as JSON.
 *
 * Default `'standard'`.
 *
 * @example
 * webhookRelay({ url, body: (m) => ({ event: m.type, id: m.id, attributes: m.payload }) });
 */
export type WebhookBody = 'standard' | 'payload' | ((envelope: Envelope) => unknown);

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

/**
 * Shortest value treated as a secret when it may just as well be a plain word (a header value, a
 * query value, a URL's user name): scrubbing "user" or "json" would turn `user-agent` into
 * `***-agent` in every message. Passwords and signing secrets are secret down to
 * {@link MIN_SCRUBBED} characters.
 */
const MIN_SECRET_LENGTH = 8;

/** A value that may be a token, judged by its length alone. */
export function maySecret(value: string): boolean {
  return value.length >= MIN_SECRET_LENGTH;
}

// Below this, a "secret" is a few letters that occur in ordinary words: scrubbing them, or
// redacting that many letters at the end of a text, would hide more than it protects.
const MIN_SCRUBBED = 4;

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
  const query = url.search.slice(1);
  const raw = query.split('&').map((pair) => pair.slice(pair.indexOf('=') + 1));
  const sensitive = [...url.searchParams.values(), ...raw, query].filter(maySecret);
  let authorization: string | undefined;
  if (url.username !== '' || url.password !== '') {
    const username = safeDecode(url.username);
    const password = safeDecode(url.password);
    const token = Buffer.from(`${username}:${password}`, 'utf8').toString('base64');
    authorization = `Basic ${token}`;
    // A user name alone is often the token itself (https://TOKEN@host/): it is as secret as a
    // password, once it is long enough to be a token rather than a name such as "user".
    sensitive.push(...[username, url.username].filter(maySecret));
    sensitive.push(...[password, url.password, token].filter((s) => s.length >= MIN_SCRUBBED));
    url.username = '';
    url.password = '';
  }
  return { href: url.href, display, authorization, sensitive: [...new Set(sensitive)] };
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
  // Leading or trailing spaces would be trimmed on the way: encoded, they come back.
  return /^[\x20-\x24\x26-\x7E]*$/.test(value) && value.trim() === value ? value : encodeURIComponent(value);
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
  if (body === 'payload') return payloadJson(envelope);
  if (body === 'standard') {
    // JSON.stringify({ type, timestamp, data }) with the payload's stored text spliced in.
    const head = `{"type":${JSON.stringify(envelope.type)},"timestamp":"${envelope.insertedAt.toISOString()}","data":`;
    return `${head}${payloadJson(envelope)}}`;
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
 * telemetry): the given strings, in any form they may take there (see {@link secretForms}), and
 * the password of any `scheme://user:password@` URL.
 */
export function scrub(text: string, sensitive: readonly string[]): string {
  let result = text;
  for (const form of secretForms(sensitive)) result = result.split(form).join('***');
  return redactCredentials(result);
}

/**
 * {@link scrub} for text that may stop part-way through a secret, such as a response body read
 * only in part: the start of a secret left at its very end is redacted too. The text must be
 * scrubbed whole before it is cut any shorter, or a secret across the cut would keep its start.
 */
export function scrubCut(text: string, sensitive: readonly string[]): string {
  const result = scrub(text, sensitive);
  let longest = 0;
  for (const form of secretForms(sensitive)) {
    for (let n = Math.min(form.length - 1, result.length); n > longest && n >= MIN_SCRUBBED; n--) {
      if (result.endsWith(form.slice(0, n))) {
        longest = n;
        break;
      }
    }
  }
  return longest === 0 ? result : `${result.slice(0, -longest)}***`;
}

/**
 * Each secret as it may appear in a receiver's answer or an error: as is, JSON-escaped (a JSON
 * body echoing `a"b` holds `a\"b`), percent-encoded, and with its whitespace collapsed as in a
 * one-line snippet. Longest first: replacing a short secret inside a longer one would leave the
 * rest of the longer one visible.
 */
function secretForms(sensitive: readonly string[]): string[] {
  const forms = new Set<string>();
  for (const secret of new Set(sensitive)) {
    for (const form of [secret, JSON.stringify(secret).slice(1, -1), percentEncoded(secret)]) {
      forms.add(form);
      forms.add(form.replace(/\s+/g, ' ').trim());
    }
  }
  return [...forms].filter((form) => form.length >= MIN_SCRUBBED).sort((a, b) => b.length - a.length);
}

function percentEncoded(text: string): string {
  try {
    return encodeURIComponent(text);
  } catch {
    return text; // a lone surrogate: no URL could have carried it encoded
  }
}
