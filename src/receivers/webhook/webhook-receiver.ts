/**
 * The webhook receiver: verifies a Standard Webhooks request (as the webhook relay signs it),
 * handles it once through an inbox inside the consumer's transaction, and answers 2xx only after
 * that transaction committed. One function of a request's method, headers and raw body, so that
 * the fetch handler here and the node:http, Express and Fastify wrappers (webhook-receiver-node.ts)
 * answer alike.
 */
import { describeError, isOutboxerError, OutboxerError } from '../../core/errors.js';
import { InboxReceiver, type ReceiverOptions, type StoredParts } from '../../core/inbox/receiver.js';
import { integerOption, invalidOption } from '../../core/options.js';
import { OUTBOXER_HEADERS } from '../../relays/shared/headers.js';
import {
  decodeSecret,
  secretRequirement,
  verifyWebhook,
  WEBHOOK_HEADERS,
  WebhookVerificationError,
  type WebhookHeadersLike,
} from '../../relays/webhook/webhook-signature.js';
import { readLimited, TooLarge } from './webhook-body.js';

/** A verified webhook, as the handler gets it. */
export interface ReceivedWebhook {
  /** `webhook-id`: the outbox id for the webhook relay. Signed; the inbox's id. */
  readonly id: string;
  /** `webhook-timestamp`: when this attempt was sent (each retry has its own). Signed. */
  readonly timestamp: Date;
  /**
   * The JSON body, parsed. Signed. From the webhook relay with its default body,
   * `{ type, timestamp, data }`: the message type, when it was published and the payload.
   */
  readonly body: unknown;
  /** The `outboxer-group-key` header, decoded; null without one. Not covered by the signature. */
  readonly groupKey: string | null;
  /** Every request header, names in lower case. Only the `webhook-*` ones are covered by the signature. */
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * Options of {@link webhookReceiver}: those of every receiver, the secret, and where ids are unique.
 *
 * @example
 * webhookReceiver({
 *   outboxer, inbox: 'partner-events', secret: process.env.WEBHOOK_SECRET!,
 *   transaction: (work) => db.transaction().execute(work),
 *   handler: async (webhook, trx) => { await trx.insertInto('events').values({ … }).execute(); },
 * });
 */
export type WebhookReceiverOptions<
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
> = ReceiverOptions<ReceivedWebhook, OutboxerTx, Sync, Tx> & WebhookReceiverOwnOptions;

/** What {@link webhookReceiver} takes besides the options of every receiver. */
export interface WebhookReceiverOwnOptions {
  /** The sender's signing secret `whsec_…` (the prefix may be left out), or several while rotating. */
  secret: string | readonly string[];
  /** Seconds a `webhook-timestamp` may be away from this server's clock, either way. Default 300. */
  tolerance?: number;
  /**
   * The inbox's source for this endpoint: where its ids are unique. Default `''` (one outbox sends
   * here). A receiver that several outboxes (tables) send to needs one endpoint, and one source,
   * per outbox: the `outboxer-outbox` header is not signed, so it cannot be trusted to tell them apart.
   */
  source?: string;
  /** The largest body taken, in bytes; a larger one is answered 413. Default 1048576 (1 MiB). */
  maxBodyBytes?: number;
}

/** A request as the wrappers pass it: the method, the headers and the raw body. */
export interface WebhookRequestParts {
  readonly method: string;
  readonly headers: WebhookHeadersLike;
  /**
   * The raw body, or null when a body parser mounted before the receiver consumed it (its parsed
   * JSON can no longer be checked against the signature): answered 500 and logged.
   */
  readonly body: Uint8Array | null;
}

/** The answer to a request: a status and a small JSON body. */
export interface WebhookAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/**
 * A fetch handler (`(request) => Promise<Response>`) for Hono, Bun, Deno and any fetch-style
 * router; {@link nodeWebhookReceiver} and {@link fastifyWebhookReceiver} mount it in node:http,
 * Express and Fastify.
 */
export interface WebhookReceiver {
  (request: Request): Promise<Response>;
  /** Answers a request given as parts: what the wrappers call. */
  answer(request: WebhookRequestParts): Promise<WebhookAnswer>;
  /** The `maxBodyBytes` option, for the wrappers' own reading. */
  readonly maxBodyBytes: number;
}

const WEBHOOK_KEYS = ['secret', 'tolerance', 'maxBodyBytes'];
const WHAT = 'webhookReceiver';

/**
 * Receives the webhook relay's requests (any Standard Webhooks sender's, in fact) into an inbox:
 *
 * - Verifies the signature over the raw body with `secret`: a missing or wrong signature, or a
 *   timestamp more than `tolerance` seconds away (an expired or replayed capture), is answered
 *   401 and nothing is written; a missing `webhook-id` or `webhook-timestamp`, 400.
 * - Runs `handler(webhook, tx)` inside `transaction`, through `outboxer.inbox(inbox).handle`
 *   with the `webhook-id` as id: a message delivered again (a retry after a lost answer, a replay
 *   within the tolerance) is recognised and not handled twice.
 * - With `store: true`, stores the webhook instead (`inbox.store`: its body, its `webhook-id`,
 *   `webhook-timestamp` and `outboxer-*` headers) for the inbox's `process` option to process
 *   later, in order per group, and answers as soon as that committed.
 * - Answers 204 only after the transaction committed, so a request the relay sees succeed has its
 *   effect stored. A handler or transaction that fails is answered 500 (the relay retries) and
 *   logged through the instance's logger; a signed body that is not JSON, 400; not a POST, 405.
 *
 * @example
 * const receiver = webhookReceiver({
 *   outboxer, inbox: 'orders', secret: process.env.WEBHOOK_SECRET!,
 *   transaction: (work) => inTransaction(pool, work),
 *   handler: async (webhook, client) => { await client.query('INSERT …', [webhook.body]); },
 * });
 * createServer(nodeWebhookReceiver(receiver)).listen(8080);   // or Express: app.post('/hooks', …)
 * app.post('/hooks', (c) => receiver(c.req.raw));                // Hono
 */
export function webhookReceiver<OutboxerTx, Sync extends boolean, Tx extends OutboxerTx = OutboxerTx>(
  options: WebhookReceiverOptions<OutboxerTx, Sync, Tx>,
): WebhookReceiver {
  // No `id` option: the signed webhook-id is the id, always there once the signature matched.
  const receiver = new InboxReceiver<ReceivedWebhook, Sync>(WHAT, options, WEBHOOK_KEYS, false, storedParts);
  const secret = checkSecret(options.secret);
  const tolerance = integerOption(`${WHAT}.tolerance`, options.tolerance, 300, 0, 86_400);
  const source = receiver.source ?? '';
  const maxBodyBytes = integerOption(`${WHAT}.maxBodyBytes`, options.maxBodyBytes, 1 << 20, 1, 128 << 20);

  async function answer(request: WebhookRequestParts): Promise<WebhookAnswer> {
    if (request.method !== 'POST') return reply(405, { error: 'POST only' }, { allow: 'POST' });
    if (request.body === null) return misplaced();
    if (request.body.byteLength > maxBodyBytes) return tooLarge(maxBodyBytes);
    const headers = lowerCaseHeaders(request.headers);
    let verified;
    try {
      verified = verifyWebhook(secret, request.headers, request.body, { tolerance });
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error;
      const refused = refusal(error, (headers[WEBHOOK_HEADERS.signature] ?? '') !== '');
      receiver.logger.warn('outboxer: the webhook receiver refused a request', {
        inbox: receiver.inboxName,
        status: refused.status,
        reason: refused.reason,
      });
      return reply(refused.status, { error: refused.reason });
    }
    let body: unknown;
    try {
      body = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(request.body));
    } catch {
      return reply(400, { error: 'the body is not JSON' });
    }
    const groupKey = decodeHeader(headers[OUTBOXER_HEADERS.groupKey]);
    const webhook: ReceivedWebhook = {
      id: verified.id,
      timestamp: verified.timestamp,
      body,
      groupKey,
      headers,
    };
    try {
      const outcome = await receiver.receive(webhook, { id: verified.id, source, groupKey }, () => webhook);
      return reply(outcome.duplicate ? 200 : 204, outcome.duplicate ? { duplicate: true } : undefined);
    } catch (error) {
      return failure(error, verified.id);
    }
  }

  function failure(error: unknown, id: string): WebhookAnswer {
    // An id or group key the inbox cannot store: sending it again will not help.
    if (isOutboxerError(error) && error.code === 'INVALID_MESSAGE')
      return reply(400, { error: error.message });
    receiver.logger.error('outboxer: the webhook receiver could not handle a request; answered 500', {
      inbox: receiver.inboxName,
      id,
      error: describeError(error, 500),
    });
    // Nothing of the error leaves the server: a driver's message may name hosts or users.
    return reply(500, { error: 'the request could not be handled; the sender should retry' });
  }

  function misplaced(): WebhookAnswer {
    const problem =
      'the webhook receiver got a parsed body, not the raw bytes its signature covers: mount it before any body parser (express.json()), or give its route express.raw({ type: () => true })';
    receiver.logger.error(`outboxer: ${problem}`, { inbox: receiver.inboxName });
    return reply(500, { error: problem });
  }

  const handle = async (request: Request): Promise<Response> => {
    let body: Uint8Array;
    try {
      body = await readLimited(request.headers.get('content-length'), request.body, maxBodyBytes);
    } catch (error) {
      if (error instanceof TooLarge) return toResponse(tooLarge(maxBodyBytes));
      throw error;
    }
    return toResponse(await answer({ method: request.method, headers: request.headers, body }));
  };
  return Object.assign(handle, { answer, maxBodyBytes });
}

/**
 * What `store: true` keeps of a webhook: its body, and of its headers only the sender's
 * `webhook-id` and `webhook-timestamp` and outboxer's `outboxer-*` (not the signature, nor what
 * a proxy or a browser adds: cookies, credentials).
 */
function storedParts(webhook: ReceivedWebhook): StoredParts {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(webhook.headers)) {
    if (name === WEBHOOK_HEADERS.id || name === WEBHOOK_HEADERS.timestamp || name.startsWith('outboxer-'))
      headers[name] = value;
  }
  return { payload: webhook.body, headers, type: null };
}

function checkSecret(secret: unknown): string | readonly string[] {
  const secrets: unknown[] = Array.isArray(secret) ? secret : [secret];
  if (secrets.length === 0)
    throw invalidOption(`${WHAT}.secret`, 'a "whsec_…" secret or a non-empty array of them', secret);
  secrets.forEach((s, i) => {
    const key = decodeSecret(s, { requirePrefix: false, minBytes: 1 });
    if (!Buffer.isBuffer(key)) {
      const path = Array.isArray(secret) ? `${WHAT}.secret[${i}]` : `${WHAT}.secret`;
      // Not echoed: it is a secret.
      throw new OutboxerError(
        'INVALID_OPTIONS',
        `Option "${path}" must be ${secretRequirement(1)}; ${key.problem}.`,
      );
    }
  });
  return secret as string | readonly string[];
}

/**
 * 401 for what makes the request untrustworthy (no signature, a wrong one, a timestamp outside the
 * tolerance: a replayed capture); 400 for a request that is not a Standard Webhook at all. The
 * reason is named so that the sender's operator sees it (the webhook relay keeps the start of the
 * answer in the message's lastError); it tells an attacker nothing the specification does not.
 */
function refusal(error: WebhookVerificationError, signed: boolean): { status: number; reason: string } {
  if (!signed) return { status: 401, reason: 'missing-signature' };
  const malformed = error.reason === 'invalid-timestamp' || error.reason === 'missing-header';
  return { status: malformed ? 400 : 401, reason: error.reason };
}

/** The answer to a body over `max` bytes. */
export function tooLarge(max: number): WebhookAnswer {
  return reply(413, { error: `the body is over ${max} bytes` });
}

function reply(status: number, body?: object, headers: Record<string, string> = {}): WebhookAnswer {
  if (body === undefined) return { status, headers, body: '' };
  return { status, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) };
}

function toResponse(answer: WebhookAnswer): Response {
  return new Response(answer.status === 204 ? null : answer.body, {
    status: answer.status,
    headers: answer.headers,
  });
}

function lowerCaseHeaders(headers: WebhookHeadersLike): Record<string, string> {
  const result: Record<string, string> = {};
  if (typeof (headers as { forEach?: unknown }).forEach === 'function' && !Array.isArray(headers)) {
    (headers as Headers).forEach((value, name) => (result[name.toLowerCase()] = value));
    return result;
  }
  for (const [name, value] of Object.entries(
    headers as Record<string, string | readonly string[] | undefined>,
  )) {
    if (value !== undefined)
      result[name.toLowerCase()] = typeof value === 'string' ? value : value.join(', ');
  }
  return result;
}

/** The relay percent-encodes a group key that is not printable ASCII; a malformed one is kept as sent. */
function decodeHeader(value: string | undefined): string | null {
  if (value === undefined || value === '') return null;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
