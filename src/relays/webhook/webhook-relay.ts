import { DeliveryError, OutboxerError } from '../../core/errors.js';
import type { DeliveryContext, Envelope, Relay } from '../../core/relay.js';
import {
  resolveWebhookOptions,
  type ResolvedWebhookOptions,
  type WebhookRelayOptions,
} from './webhook-options.js';
import { buildHeaders, encodeBody, parseTarget, scrub, type Target } from './webhook-request.js';
import { classifyStatus, readSnippet, responseError } from './webhook-response.js';
import { deliverConcurrently } from './webhook-scheduler.js';
import { signatureHeader, WEBHOOK_HEADERS } from './webhook-signature.js';

/**
 * A relay that POSTs each message to an HTTP endpoint, signed the Standard Webhooks way
 * (https://www.standardwebhooks.com/). No SDK: it uses `fetch`.
 *
 * - One request per message; the body is `{ type, timestamp, data }` by default (see `body`).
 * - `webhook-id` is the outbox id, the same on every retry: receivers deduplicate on it.
 *   `webhook-timestamp` is the attempt's Unix seconds; `webhook-signature` is sent when `secret`
 *   is set. The `outboxer-*` headers and the message's own headers come along.
 * - Order: the messages of one ordering key are sent one at a time, each after the previous one
 *   was answered 2xx; after a failure the rest of that key waits for the retry. `concurrency`
 *   (default 1) lets requests of different keys overlap.
 * - 2xx: delivered. 3xx: rejected (redirects are not followed). 408, 429, 5xx, network errors and
 *   timeouts: retried, after `Retry-After` when the response has one. Other 4xx: rejected for good
 *   (a {@link PermanentError}, which dead-letters at once unless the outbox is strict).
 * - Error messages never contain the secret, header values or the URL's credentials and query.
 *
 * @example
 * import { webhookRelay } from 'outboxer/webhook';
 * const outboxer = new Outboxer({
 *   database: nodePostgres(pool),
 *   outboxes: {
 *     orders: {
 *       relay: webhookRelay({ url: 'https://partner.example/hooks', secret: process.env.WEBHOOK_SECRET }),
 *       batchSize: 20,
 *     },
 *   },
 * });
 */
export function webhookRelay(options: WebhookRelayOptions): Relay {
  const resolved = resolveWebhookOptions(options);
  return {
    name: resolved.name,
    deliver: (batch, context) =>
      deliverConcurrently(batch, context, resolved.concurrency, (envelope) =>
        send(resolved, envelope, context),
      ),
  };
}

/** One attempt for one message: resolves when the receiver answered 2xx, throws otherwise. */
async function send(
  options: ResolvedWebhookOptions,
  envelope: Envelope,
  context: DeliveryContext,
): Promise<void> {
  const target = resolveTarget(options, envelope);
  const body = encodeBody(envelope, options.body);
  const id = String(envelope.id);
  // The attempt's time, not the event's: receivers compare it with their clock against replays.
  const timestamp = Math.floor(Date.now() / 1000);
  const webhook: Record<string, string> = {
    [WEBHOOK_HEADERS.id]: id,
    [WEBHOOK_HEADERS.timestamp]: String(timestamp),
  };
  if (options.keys.length > 0)
    webhook[WEBHOOK_HEADERS.signature] = signatureHeader(options.keys, id, timestamp, body);
  const headers = buildHeaders({ envelope, configured: options.headers, target, webhook });
  // A timer and a listener of this call's own, held until it ends. AbortSignal.timeout() and
  // AbortSignal.any() only hold their signals weakly, and so does fetch: after a garbage
  // collection mid-body neither the timeout nor the abandonment reached the request, and a
  // receiver that never ended its body held the batch for good.
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new DOMException(`timed out after ${options.timeout} ms`, 'TimeoutError')),
    options.timeout,
  );
  const abandon = (): void => controller.abort(context.signal.reason);
  if (context.signal.aborted) abandon();
  else context.signal.addEventListener('abort', abandon, { once: true });
  try {
    let response;
    try {
      response = await options.fetch(target.href, {
        method: 'POST',
        headers,
        body,
        redirect: 'manual',
        signal: controller.signal,
      });
    } catch (error) {
      throw requestError(error, options, target, context);
    }
    // Read (a little of) the body in every case: it lets the connection be reused, and says why.
    const snippet = await readSnippet(response.body, controller.signal);
    if (classifyStatus(response.status, options.retryStatuses) === 'delivered') return;
    throw responseError(response, snippet, target, options);
  } finally {
    clearTimeout(timer);
    context.signal.removeEventListener('abort', abandon);
  }
}

/** The message's destination. A url function that fails is a configuration problem: retryable. */
function resolveTarget(options: ResolvedWebhookOptions, envelope: Envelope): Target {
  if (typeof options.target !== 'function') return options.target;
  let value: unknown;
  try {
    value = options.target(envelope);
  } catch (error) {
    throw misconfigured(
      `the url function threw for message ${envelope.id}: ${(error as Error)?.message ?? String(error)}`,
      options,
      error,
    );
  }
  const target = typeof value === 'string' || value instanceof URL ? parseTarget(value) : `${typeof value}`;
  if (typeof target === 'string') {
    throw misconfigured(
      `the url function returned ${target} for message ${envelope.id}; it must return an absolute http: or https: URL`,
      options,
    );
  }
  if (target.authorization !== undefined && options.headers.has('authorization')) {
    throw misconfigured(
      `the url function returned a URL with credentials for message ${envelope.id} while headers.authorization is set; use one or the other`,
      options,
    );
  }
  return target;
}

// Retryable on purpose: fixing the configuration and restarting lets the message through, where a
// permanent error would have dead-lettered it (and every message after it) in the meantime.
function misconfigured(problem: string, options: ResolvedWebhookOptions, cause?: unknown): OutboxerError {
  return new OutboxerError(
    'RELAY_MISCONFIGURED',
    scrub(`Webhook relay "${options.name}" is misconfigured: ${problem}.`, options.sensitive),
    {
      cause,
      retryable: true,
    },
  );
}

/** A request that got no response: a network error, the timeout, or the batch being abandoned. */
function requestError(
  error: unknown,
  options: ResolvedWebhookOptions,
  target: Target,
  context: DeliveryContext,
): DeliveryError {
  const what = `Webhook POST ${target.display}`;
  let message: string;
  if (context.signal.aborted) message = `${what} was abandoned: ${describe(context.signal.reason)}`;
  else if ((error as Error)?.name === 'TimeoutError')
    message = `${what} timed out after ${options.timeout} ms without a response (option "timeout").`;
  else message = `${what} failed: ${describe(error)}`;
  return new DeliveryError(scrub(message, [...options.sensitive, ...target.sensitive]), { cause: error });
}

/** `fetch failed (connect ECONNREFUSED 127.0.0.1:8080)`: undici hides the useful part in `cause`. */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? error.cause : undefined;
  return cause === undefined || error.message.includes(cause.message)
    ? error.message
    : `${error.message} (${cause.message})`;
}
