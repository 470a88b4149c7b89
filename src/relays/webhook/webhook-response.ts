import { STATUS_CODES } from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import { DeliveryError, PermanentError } from '../../core/errors.js';
import type { WebhookResponse } from './webhook-options.js';
import { scrub, scrubCut, type Target } from './webhook-request.js';

/** What a status means for the message. */
export type StatusClass = 'delivered' | 'redirect' | 'rejected' | 'retry';

/**
 * 2xx delivered; 3xx a redirect we do not follow; 408, 429, the configured extra statuses, 5xx
 * and anything unexpected are worth retrying; every other 4xx is a rejection for good.
 */
export function classifyStatus(status: number, retryStatuses: ReadonlySet<number>): StatusClass {
  if (status >= 200 && status <= 299) return 'delivered';
  if (status >= 300 && status <= 399) return 'redirect';
  if (status >= 400 && status <= 499 && status !== 408 && status !== 429 && !retryStatuses.has(status))
    return 'rejected';
  return 'retry';
}

// All three HTTP-date forms start with a day name ("Sun, 06 Nov 1994…", "Sunday, 06-Nov-94…",
// "Sun Nov  6…"); checking it keeps Date.parse from reading "12" or "1 2" as a date.
const HTTP_DATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? /;

/**
 * Milliseconds a `Retry-After` value (seconds, or an HTTP-date) asks to wait, at most `max`.
 * Undefined when absent, malformed, zero or past, or when `max` is 0: the outbox's backoff
 * applies then (honouring "0" would retry at once, in a tight loop against a struggling server).
 */
export function parseRetryAfter(
  value: string | null,
  max: number,
  now: number = Date.now(),
): number | undefined {
  if (value === null || max === 0) return undefined;
  const text = value.trim();
  let delay: number;
  if (/^\d+$/.test(text)) delay = Number(text) * 1000;
  else if (HTTP_DATE.test(text) && !Number.isNaN(Date.parse(text))) delay = Date.parse(text) - now;
  else return undefined;
  if (!(delay > 0)) return undefined;
  return Math.min(delay, max);
}

const SNIPPET_BYTES = 4096;
const SNIPPET_CHARS = 200;

const ABORTED = Symbol('aborted');

/**
 * The start of a response body as text, for {@link responseError} to scrub and cut. Reads at most 4 KiB
 * and stops (a huge error page must not be downloaded to be dropped), and stops waiting when
 * `signal` aborts: each read races it, so a body that never ends cannot hold the batch even where
 * fetch no longer follows the signal. Never throws: a body that cannot be read gives what came.
 */
export async function readSnippet(body: WebhookResponse['body'], signal: AbortSignal): Promise<string> {
  if (body === null || body === undefined) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  const source = chunksOf(body);
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<typeof ABORTED>((resolve) => {
    onAbort = () => resolve(ABORTED);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    for (;;) {
      const next = await Promise.race([source.next(), aborted]);
      if (next === ABORTED || next.done) break;
      chunks.push(next.value);
      size += next.value.byteLength;
      if (size >= SNIPPET_BYTES) break;
    }
  } catch {
    // The status says what happened; a body cut short adds nothing worth failing for.
  } finally {
    signal.removeEventListener('abort', onAbort!);
    // Cancelling the stream frees (or closes) the connection, and ends a read still pending.
    source.stop();
  }
  // A character cut at the 4 KiB mark is left out rather than turned into U+FFFD: a secret's start
  // just before it must still end the text, for scrubCut to find it.
  return new StringDecoder('utf8').write(Buffer.concat(chunks).subarray(0, SNIPPET_BYTES));
}

/**
 * The body text as one line of at most 200 characters. Scrubbed before it is cut (a secret across
 * the cut would keep its start) and before it is JSON-escaped by the caller (the escaped form of a
 * secret holding `"` or `\` no longer matches it).
 */
export function bodySnippet(text: string, sensitive: readonly string[]): string {
  const line = scrubCut(text.replace(/\s+/g, ' ').trim(), sensitive);
  if (line.length <= SNIPPET_CHARS) return line;
  // Never split a surrogate pair: JSON.stringify would show the half left over as an escape.
  const cut = /[\uD800-\uDBFF]/.test(line.charAt(SNIPPET_CHARS - 1)) ? SNIPPET_CHARS - 1 : SNIPPET_CHARS;
  return `${line.slice(0, cut)}…`;
}

/** A body's chunks one read at a time, and a way to stop it without waiting for a pending read. */
function chunksOf(body: AsyncIterable<Uint8Array>): {
  next(): Promise<IteratorResult<Uint8Array>>;
  stop(): void;
} {
  const ignore = (): undefined => undefined;
  const stream = body as Partial<ReadableStream<Uint8Array>>;
  if (typeof stream.getReader === 'function') {
    // A web stream: a reader's cancel() ends a pending read, where an iterator's return() waits for it.
    const reader = stream.getReader();
    return {
      next: () => reader.read() as Promise<IteratorResult<Uint8Array>>,
      stop: () => void reader.cancel().catch(ignore),
    };
  }
  const iterator = body[Symbol.asyncIterator]();
  return {
    // A read left behind by an abort may still fail: Promise.race in readSnippet has handled it.
    next: () => iterator.next(),
    stop: () => {
      void iterator.return?.()?.catch(ignore);
      (body as { destroy?: () => void }).destroy?.();
    },
  };
}

/** The error for a response that was not 2xx, scrubbed of secrets. `text` is what {@link readSnippet} read. */
export function responseError(
  response: WebhookResponse,
  text: string,
  target: Target,
  options: { retryStatuses: ReadonlySet<number>; maxRetryAfter: number; sensitive: readonly string[] },
): DeliveryError {
  const sensitive = [...options.sensitive, ...target.sensitive];
  const status = `HTTP ${response.status}${statusText(response)}`;
  const snippet = bodySnippet(text, sensitive);
  const body = snippet === '' ? '' : `: ${JSON.stringify(snippet)}`;
  const kind = classifyStatus(response.status, options.retryStatuses);
  // The whole message once more: the status text and the Location come from the receiver too.
  const safe = (message: string) => scrub(message, sensitive);
  if (kind === 'redirect') {
    const location = response.headers.get('location');
    const to = location === null ? '' : ` to ${describeLocation(location, target)}`;
    return new PermanentError(
      safe(
        `Webhook POST ${target.display} was redirected with ${status}${to}. Redirects are not followed (they can turn the POST into a GET and drop the body): set url to the final address.`,
      ),
    );
  }
  if (kind === 'rejected') {
    return new PermanentError(
      safe(`Webhook POST ${target.display} was rejected with ${status}${body}.${hint(response.status)}`),
    );
  }
  const retryAfter = parseRetryAfter(response.headers.get('retry-after'), options.maxRetryAfter);
  const wait = retryAfter === undefined ? '' : ` Retry-After: next attempt in ${retryAfter} ms.`;
  return new DeliveryError(safe(`Webhook POST ${target.display} failed with ${status}${body}.${wait}`), {
    retryAfter,
  });
}

function statusText(response: WebhookResponse): string {
  const text = response.statusText || STATUS_CODES[response.status];
  return text ? ` ${text}` : '';
}

function describeLocation(location: string, target: Target): string {
  try {
    const url = new URL(location, target.href);
    return `${url.origin}${url.pathname}${url.search === '' ? '' : '?…'}`;
  } catch {
    return 'an invalid Location';
  }
}

function hint(status: number): string {
  if (status === 401 || status === 403)
    return ' Check the credentials (the url or the headers option) and the signing secret the receiver expects.';
  if (status === 404 || status === 405) return ' Check the url.';
  if (status === 410) return ' The receiver no longer accepts these webhooks: remove or change the endpoint.';
  if (status === 413) return ' The body is larger than the receiver accepts.';
  return '';
}
