/**
 * What a failed `addBulk` means: the connection or the server refused everything for now (the
 * whole batch is retried), the credentials are wrong (a misconfiguration), or one job was refused
 * (found by sending the batch's jobs one by one; a job BullMQ's own checks refuse is permanent).
 */
import { DeliveryError, isOutboxerError, OutboxerError, PermanentError } from '../../core/errors.js';

/** ioredis and network failures. */
const CONNECTION =
  /Connection is closed|Stream isn't writeable|Connection lost|Reached the max retries per request limit|Socket closed unexpectedly|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN/i;
/** Redis replies that refuse every write for now, not one job. */
const SERVER_REFUSES_ALL = /^(LOADING|READONLY|CLUSTERDOWN|TRYAGAIN|MASTERDOWN|BUSY|OOM|MISCONF)\b/;
/** Bad credentials or database: ioredis reports them as connection errors and retries forever. */
const CREDENTIALS =
  /^(NOAUTH|WRONGPASS|NOPERM)\b|DB index is out of range|invalid password|invalid username-password/i;
/** BullMQ's own checks of one job, before anything is sent: the same job fails the same way again. */
const INVALID_JOB =
  /exceeds the limit|Custom Id cannot|JobId cannot|Priority should|cannot be used together|Deduplication id must be provided|Jitter should be|Debounce option|Delay cannot be negative|Do not know how to serialize|circular structure|Invalid string length/i;

/** A call that did not finish in time or was abandoned: every job of it counts as failed. */
export class BullmqCallAbandoned extends DeliveryError {
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
    this.name = 'BullmqCallAbandoned';
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** True when the error says Redis refused the connection's credentials or database. */
export function isCredentialsError(error: unknown): boolean {
  return CREDENTIALS.test(messageOf(error));
}

/**
 * True when nothing can be learned per job: the connection is down, the call timed out, Redis
 * refuses every write, or the credentials are wrong. The batch is retried as a whole.
 */
export function failsWholeBatch(error: unknown): boolean {
  if (error instanceof BullmqCallAbandoned || isOutboxerError(error)) return true;
  const message = messageOf(error);
  return CONNECTION.test(message) || SERVER_REFUSES_ALL.test(message) || CREDENTIALS.test(message);
}

/**
 * The error recorded for a message. `jobId` is set when the call held that job alone, so a refusal
 * is about this job: BullMQ's own checks then make it a {@link PermanentError}.
 */
export function deliveryErrorOf(error: unknown, queue: string, jobId?: string): unknown {
  if (isOutboxerError(error)) return error;
  const message = messageOf(error);
  if (CREDENTIALS.test(message)) {
    return new OutboxerError(
      'RELAY_MISCONFIGURED',
      `Redis refused the connection of BullMQ queue "${queue}" (${message}). Fix the queue's connection options: username, password, db.`,
      { cause: error, retryable: true },
    );
  }
  if (jobId !== undefined && INVALID_JOB.test(message)) {
    return new PermanentError(`BullMQ refused job "${jobId}" of queue "${queue}": ${message}`, {
      cause: error,
    });
  }
  return new DeliveryError(`BullMQ addBulk to queue "${queue}" failed: ${message}`, { cause: error });
}
