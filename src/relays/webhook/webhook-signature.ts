import { createHmac, timingSafeEqual } from 'node:crypto';
import { OutboxerError } from '../../core/errors.js';

/**
 * The Standard Webhooks header names (https://www.standardwebhooks.com/).
 *
 * @example
 * const id = req.headers[WEBHOOK_HEADERS.id]; // 'webhook-id'
 */
export const WEBHOOK_HEADERS = {
  /** The message id: the outbox id, the same on every attempt, so receivers can deduplicate. */
  id: 'webhook-id',
  /** Unix seconds of this attempt (not of the event): a receiver rejects old ones against replays. */
  timestamp: 'webhook-timestamp',
  /** Space-separated `v1,<base64 HMAC-SHA256>` signatures, one per secret. */
  signature: 'webhook-signature',
} as const;

const SECRET_PREFIX = 'whsec_';
// Strict standard base64: Buffer.from(text, 'base64') silently skips bad characters, so a typo or
// a password pasted in place of a secret would otherwise become some other key.
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Signing keys the Standard Webhooks spec allows: 24 to 64 random bytes. */
export const SECRET_BYTES = { min: 24, max: 64 } as const;

/**
 * Decodes a `whsec_<base64>` secret into its key bytes, or returns what is wrong with it (without
 * the secret). `requirePrefix: false` also takes the bare base64, as the reference libraries do.
 */
export function decodeSecret(
  secret: unknown,
  options: { requirePrefix: boolean; minBytes: number },
): Buffer | { problem: string } {
  if (typeof secret !== 'string') return { problem: `got ${secret === null ? 'null' : typeof secret}` };
  let encoded = secret;
  if (encoded.startsWith(SECRET_PREFIX)) encoded = encoded.slice(SECRET_PREFIX.length);
  else if (options.requirePrefix)
    return { problem: `got a string without the "${SECRET_PREFIX}" prefix (not shown)` };
  if (encoded.length === 0 || !BASE64.test(encoded))
    return { problem: 'got characters that are not base64 (not shown)' };
  const key = Buffer.from(encoded, 'base64');
  if (key.length < options.minBytes || key.length > SECRET_BYTES.max)
    return { problem: `got ${key.length} bytes` };
  return key;
}

/** What a secret must be, for error messages. */
export function secretRequirement(minBytes: number): string {
  return `"${SECRET_PREFIX}" followed by the base64 of ${minBytes} to ${SECRET_BYTES.max} random bytes`;
}

function keysOf(secret: string | readonly string[], what: string): Buffer[] {
  const secrets = typeof secret === 'string' ? [secret] : secret;
  if (!Array.isArray(secrets) || secrets.length === 0) {
    throw new OutboxerError(
      'INVALID_OPTIONS',
      `${what} must be a "whsec_…" secret or a non-empty array of them.`,
    );
  }
  return secrets.map((s, i) => {
    const key = decodeSecret(s, { requirePrefix: false, minBytes: 1 });
    if (!Buffer.isBuffer(key)) {
      throw new OutboxerError(
        'INVALID_OPTIONS',
        `${what}${secrets.length > 1 ? `[${i}]` : ''} must be ${secretRequirement(1)}; ${key.problem}.`,
      );
    }
    return key;
  });
}

/** The base64 HMAC-SHA256 of `${id}.${timestamp}.${body}`: the `v1` signature without its prefix. */
function hmac(key: Buffer, id: string, timestamp: number, body: string | Uint8Array): string {
  const mac = createHmac('sha256', key).update(`${id}.${timestamp}.`, 'utf8');
  mac.update(typeof body === 'string' ? Buffer.from(body, 'utf8') : body);
  return mac.digest('base64');
}

/** The `webhook-signature` value for the given keys: one `v1,…` per key, space-separated. */
export function signatureHeader(
  keys: readonly Buffer[],
  id: string,
  timestamp: number,
  body: string | Uint8Array,
): string {
  return keys.map((key) => `v1,${hmac(key, id, timestamp, body)}`).join(' ');
}

function toSeconds(timestamp: number | Date): number {
  return timestamp instanceof Date ? Math.floor(timestamp.getTime() / 1000) : Math.floor(timestamp);
}

/**
 * Signs a webhook the Standard Webhooks way: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`,
 * one signature per secret, space-separated (several secrets = key rotation). The webhook relay
 * does this for you; use it in a receiver's tests or to sign webhooks you send yourself.
 *
 * @param secret `whsec_<base64>` (the prefix may be left out), or several for rotation.
 * @param timestamp Unix seconds, or a Date.
 * @example
 * signWebhook('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}')
 * // 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='
 */
export function signWebhook(
  secret: string | readonly string[],
  id: string,
  timestamp: number | Date,
  body: string | Uint8Array,
): string {
  return signatureHeader(keysOf(secret, 'signWebhook(secret)'), id, toSeconds(timestamp), body);
}

/** Why {@link verifyWebhook} refused a request: {@link WebhookVerificationError.reason}. */
export type WebhookVerificationFailure =
  | 'missing-header'
  | 'invalid-timestamp'
  | 'timestamp-too-old'
  | 'timestamp-too-new'
  | 'no-matching-signature';

/**
 * A webhook that failed verification: answer it with 401 (or 400) and do not process it.
 * `code` is `INVALID_MESSAGE`; `reason` says which check failed.
 *
 * @example
 * catch (error) {
 *   if (error instanceof WebhookVerificationError) log.warn('refused webhook', { reason: error.reason });
 * }
 */
export class WebhookVerificationError extends OutboxerError {
  readonly reason: WebhookVerificationFailure;

  constructor(reason: WebhookVerificationFailure, message: string) {
    super('INVALID_MESSAGE', message);
    this.name = 'WebhookVerificationError';
    this.reason = reason;
  }
}

/**
 * Request headers as node:http (`req.headers`), fetch (`request.headers`) or a plain object give
 * them; names in any case.
 */
export type WebhookHeadersLike =
  { get(name: string): string | null } | Readonly<Record<string, string | readonly string[] | undefined>>;

function header(headers: WebhookHeadersLike, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  const record = headers as Readonly<Record<string, string | readonly string[] | undefined>>;
  const key = Object.keys(record).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : record[key];
  return typeof value === 'string' ? value : value?.[0];
}

/**
 * Options of {@link verifyWebhook}.
 *
 * @example
 * verifyWebhook(secret, req.headers, body, { tolerance: 60 });
 */
export interface VerifyWebhookOptions {
  /**
   * Seconds the `webhook-timestamp` may differ from the receiver's clock, either way. Default 300
   * (5 minutes, as the reference libraries). It is what makes a captured request useless later.
   */
  tolerance?: number;
}

/** What a verified webhook carried. */
export interface VerifiedWebhook {
  /** `webhook-id`: the outbox id. The same on every retry: deduplicate on it. */
  readonly id: string;
  /** `webhook-timestamp`: when this attempt was sent. */
  readonly timestamp: Date;
}

/**
 * Checks a Standard Webhooks request in a receiver: the headers are present, the timestamp is
 * within `tolerance` of now, and one `v1` signature matches one of the secrets (compared in
 * constant time). Pass the raw body exactly as received: JSON parsed and serialised again may
 * differ by a space and no longer match.
 *
 * @param secret `whsec_<base64>` (the prefix may be left out), or several while rotating.
 * @throws {@link WebhookVerificationError} when the request must be refused.
 * @example
 * http.createServer(async (req, res) => {
 *   const body = Buffer.concat(await req.toArray());
 *   try {
 *     const { id } = verifyWebhook(process.env.WEBHOOK_SECRET!, req.headers, body);
 *     await handleOnce(id, JSON.parse(body.toString('utf8')));
 *     res.writeHead(204).end();
 *   } catch (error) {
 *     res.writeHead(error instanceof WebhookVerificationError ? 401 : 500).end();
 *   }
 * });
 */
export function verifyWebhook(
  secret: string | readonly string[],
  headers: WebhookHeadersLike,
  body: string | Uint8Array,
  options: VerifyWebhookOptions = {},
): VerifiedWebhook {
  const tolerance = options.tolerance ?? 300;
  if (typeof tolerance !== 'number' || Number.isNaN(tolerance) || tolerance < 0) {
    throw new OutboxerError(
      'INVALID_OPTIONS',
      `verifyWebhook option "tolerance" must be a number of seconds >= 0; got ${String(tolerance)}.`,
    );
  }
  const keys = keysOf(secret, 'verifyWebhook(secret)');
  const id = header(headers, WEBHOOK_HEADERS.id);
  const timestampText = header(headers, WEBHOOK_HEADERS.timestamp);
  const signatures = header(headers, WEBHOOK_HEADERS.signature);
  if (!id || !timestampText || !signatures) {
    throw new WebhookVerificationError(
      'missing-header',
      'Webhook is missing the webhook-id, webhook-timestamp or webhook-signature header.',
    );
  }
  const timestamp = checkTimestamp(timestampText, tolerance);
  const expected = keys.map((key) => Buffer.from(hmac(key, id, timestamp, body)));
  for (const candidate of signatures.split(' ')) {
    const comma = candidate.indexOf(',');
    if (candidate.slice(0, comma) !== 'v1') continue; // other schemes (v1a: asymmetric) are not ours
    const given = Buffer.from(candidate.slice(comma + 1));
    if (expected.some((e) => e.length === given.length && timingSafeEqual(e, given))) {
      return { id, timestamp: new Date(timestamp * 1000) };
    }
  }
  throw new WebhookVerificationError(
    'no-matching-signature',
    'Webhook signature does not match: wrong secret, or the body was changed (verify the raw body, not re-serialised JSON).',
  );
}

function checkTimestamp(text: string, tolerance: number): number {
  if (!/^\d{1,15}$/.test(text)) {
    throw new WebhookVerificationError(
      'invalid-timestamp',
      'Webhook timestamp is not a number of Unix seconds.',
    );
  }
  const timestamp = Number(text);
  const now = Math.floor(Date.now() / 1000);
  if (now - timestamp > tolerance) {
    throw new WebhookVerificationError(
      'timestamp-too-old',
      `Webhook timestamp is ${now - timestamp} s old, more than the tolerance of ${tolerance} s (a replay, or clocks apart).`,
    );
  }
  if (timestamp - now > tolerance) {
    throw new WebhookVerificationError(
      'timestamp-too-new',
      `Webhook timestamp is ${timestamp - now} s in the future, more than the tolerance of ${tolerance} s (clocks apart).`,
    );
  }
  return timestamp;
}
