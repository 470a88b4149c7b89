/** What `explainMissingSchema` needs of a dialect (structural: errors.ts stays a leaf of the import graph). */
interface MissingSchemaReader {
  missingSchemaObject(message: string): string | undefined;
}

const ERROR_BRAND = Symbol.for('outboxer.error');

/**
 * Every code an {@link OutboxerError} can carry. The list is closed: a new code is a new minor version.
 */
export const ERROR_CODES = [
  'INVALID_OPTIONS',
  'INVALID_IDENTIFIER',
  'UNKNOWN_OUTBOX',
  'UNKNOWN_INBOX',
  'INVALID_MESSAGE',
  'PAYLOAD_NOT_ENCODABLE',
  'PAYLOAD_TOO_LARGE',
  'NOT_IN_TRANSACTION',
  'INVALID_STATE',
  'CONFIGURATION_MISMATCH',
  'LEASE_LOST',
  'DELIVERY_FAILED',
  'RELAY_MISCONFIGURED',
  'DATABASE_UNSUPPORTED',
  'SCHEMA_MISSING',
  'BATCH_TOO_LARGE',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export interface OutboxerErrorOptions {
  cause?: unknown;
  /** Whether trying the same thing again later can succeed. */
  retryable?: boolean;
}

/**
 * The one error family of outboxer. Check with {@link isOutboxerError} (works across duplicate
 * copies of the package) and branch on `code`.
 */
export class OutboxerError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;

  constructor(code: ErrorCode, message: string, options: OutboxerErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'OutboxerError';
    this.code = code;
    this.retryable = options.retryable ?? false;
    Object.defineProperty(this, ERROR_BRAND, { value: true });
  }
}

/** True for any outboxer error, even one thrown by another copy of the package. */
export function isOutboxerError(value: unknown): value is OutboxerError {
  return (
    typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[ERROR_BRAND] === true
  );
}

export interface DeliveryErrorOptions {
  cause?: unknown;
  /** The destination will never accept this message: see {@link PermanentError}. */
  permanent?: boolean;
  /** Milliseconds the destination asked us to wait (e.g. an HTTP `Retry-After`); overrides backoff. */
  retryAfter?: number;
}

/**
 * Thrown (or returned) by a relay for a message the destination did not accept.
 * A plain `Error` works too; this class adds `permanent` and `retryAfter`.
 */
export class DeliveryError extends OutboxerError {
  readonly permanent: boolean;
  readonly retryAfter: number | undefined;

  constructor(message: string, options: DeliveryErrorOptions = {}) {
    super('DELIVERY_FAILED', message, { cause: options.cause, retryable: !options.permanent });
    this.name = 'DeliveryError';
    this.permanent = options.permanent ?? false;
    this.retryAfter = options.retryAfter;
  }
}

/**
 * The destination rejected the message for good (a 4xx, an invalid body). With a finite
 * `maxAttempts` the message goes dead at once. In strict mode (`maxAttempts: Infinity`) it is
 * retried at the maximum backoff instead, because strict mode promises never to leave a gap in a
 * group; discard it, or fix the destination, to let the group move on.
 */
export class PermanentError extends DeliveryError {
  constructor(message: string, options: Omit<DeliveryErrorOptions, 'permanent'> = {}) {
    super(message, { ...options, permanent: true });
    this.name = 'PermanentError';
  }
}

/** The partition was taken over by another worker; nothing of the batch was acknowledged. */
export class LeaseLostError extends OutboxerError {
  constructor(outbox: string, partition: number) {
    super(
      'LEASE_LOST',
      `Worker lost partition ${partition} of outbox "${outbox}" to another node; the batch was not acknowledged and will be delivered again by the new owner.`,
      { retryable: true },
    );
    this.name = 'LeaseLostError';
  }
}

/** A value as an error message shows it, briefly; never throws (a BigInt, a Symbol, a Proxy). */
export function showValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (Array.isArray(value)) return 'an array';
  if (value === null || typeof value !== 'object') return String(value);
  return 'an object';
}

/** Short, loggable text of any thrown value, for `lastError`. */
export function describeError(error: unknown, maxLength: number): string {
  let text: string;
  try {
    if (error instanceof Error) {
      text = `${error.name}: ${error.message}`;
    } else {
      text = typeof error === 'string' ? error : (JSON.stringify(error) ?? String(error));
    }
  } catch {
    // A getter that throws, a cycle, a BigInt: say what we can without failing the caller.
    text = safeString(error);
  }
  // NUL and unpaired surrogates become U+FFFD: neither can be stored as UTF-8 text.
  return truncate(redactCredentials(text).replace(/\0/g, '\uFFFD').toWellFormed(), maxLength);
}

function safeString(value: unknown): string {
  try {
    return Object.prototype.toString.call(value) === '[object Error]'
      ? 'Error (its message could not be read)'
      : String(value);
  } catch {
    return 'an unprintable value';
  }
}

/**
 * Hides passwords in connection strings: `scheme://user:password@host` (the password may contain
 * `@`), `password=…` in libpq key=value strings and query parameters.
 */
export function redactCredentials(text: string): string {
  return text
    .replace(/([a-z][a-z0-9+.-]*:\/\/[^:/@\s]*:)\S*@/gi, '$1***@')
    .replace(/((?:^|[\s;&?'"])(?:password|passwd|pwd)\s*=\s*)('[^']*'|"[^"]*"|[^\s;&'"]*)/gi, '$1***');
}

function truncate(text: string, maxLength: number): string {
  if (text.length <= maxLength) return text;
  const suffix = `… [${text.length - maxLength} more characters]`;
  let cut = Math.max(0, maxLength - suffix.length);
  // Never split a surrogate pair: the half left over is not valid UTF-8.
  if (cut > 0 && /[\uD800-\uDBFF]/.test(text.charAt(cut - 1))) cut -= 1;
  return text.slice(0, cut) + suffix;
}

/** `error` and the errors it wraps through `cause`, outermost first (at most 8). */
function errorChain(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let e = error; e !== undefined && e !== null && chain.length < 8;) {
    chain.push(e);
    e = typeof e === 'object' ? (e as { cause?: unknown }).cause : undefined;
  }
  return chain;
}

/** The tables (and Postgres's prune function) migrate() creates beside a message table, as `<table>_<suffix>`. */
const COMPANIONS = ['leases', 'nodes', 'config', 'tallies', 'groups', 'prune'];

/**
 * Whether what the database reports missing is the table or one of its companions: another
 * table's absence (a relay's own, say) is not ours to explain.
 */
function namesTable(missing: string, name: string): boolean {
  const ours = new Set([name, ...COMPANIONS.map((suffix) => `${name}_${suffix}`)]);
  return missing.split(/[^A-Za-z0-9_$]+/).some((word) => ours.has(word));
}

/**
 * A database error that says a table or column of `table`'s outbox does not exist, as
 * `SCHEMA_MISSING` (the error itself as `cause`); any other error as it is.
 */
export function explainMissingSchema(
  dialect: MissingSchemaReader,
  table: { readonly schema: string | undefined; readonly name: string },
  error: unknown,
): unknown {
  for (const e of errorChain(error)) {
    const missing = e instanceof Error ? dialect.missingSchemaObject(e.message) : undefined;
    if (missing === undefined || !namesTable(missing, table.name)) continue;
    return new OutboxerError(
      'SCHEMA_MISSING',
      `${missing} does not exist: the outbox tables of ${table.schema === undefined ? '' : `${table.schema}.`}${table.name} are missing, or older than this version of outboxer. Run migrate() (or apply what \`npx outboxer sql\` prints with your migration tool) before instances of this version start.`,
      { cause: error },
    );
  }
  return error;
}
