/**
 * What an SQS failure means for outboxer: a misconfiguration (queue, credentials, permissions),
 * a message SQS will never take (PermanentError), or something worth retrying.
 */
import { DeliveryError, OutboxerError, PermanentError } from '../../core/errors.js';
import type { SqsFailedEntry } from './sqs-client.js';

type FailureKind = 'queue-missing' | 'credentials' | 'access-denied' | 'too-long' | 'aborted' | 'other';

const QUEUE_MISSING = new Set([
  'QueueDoesNotExist',
  'AWS.SimpleQueueService.NonExistentQueue',
  'NonExistentQueue',
]);
const CREDENTIALS = new Set([
  'UnrecognizedClientException',
  'InvalidClientTokenId',
  'SignatureDoesNotMatch',
  'InvalidSignatureException',
  'IncompleteSignature',
  'IncompleteSignatureException',
  'MissingAuthenticationToken',
  'MissingAuthenticationTokenException',
  'ExpiredToken',
  'ExpiredTokenException',
  'InvalidAccessKeyId',
  'CredentialsProviderError',
]);
const ACCESS_DENIED = new Set(['AccessDenied', 'AccessDeniedException']);
const TOO_LONG = new Set([
  'BatchRequestTooLong',
  'AWS.SimpleQueueService.BatchRequestTooLong',
  'MessageTooLong',
]);
// Failed[] entries with these codes are sender faults that time or a fix of the queue's
// configuration (KMS key, permissions) can cure: retried, not dead-lettered.
const RETRYABLE_ENTRY_CODE = /throttl|^kms|accessdenied|invalidsecurity/i;

/** The names an SDK error goes by: its `name`, its `Code` and the shape id after `#` in `__type`. */
function errorCodes(error: unknown): string[] {
  if (typeof error !== 'object' || error === null) return [];
  const { name, Code, __type, message } = error as Record<string, unknown>;
  const codes = [name, Code, __type, message].filter((v): v is string => typeof v === 'string');
  return codes.flatMap((code) => [code, code.slice(code.lastIndexOf('#') + 1)]);
}

/** Sorts an error thrown by the SDK (or by the network under it) into what the relay does about it. */
export function failureKind(error: unknown): FailureKind {
  const codes = errorCodes(error);
  const has = (set: ReadonlySet<string>) => codes.some((code) => set.has(code));
  if (has(QUEUE_MISSING)) return 'queue-missing';
  if (has(CREDENTIALS)) return 'credentials';
  if (
    has(ACCESS_DENIED) ||
    (error as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode === 403
  )
    return 'access-denied';
  if (has(TOO_LONG)) return 'too-long';
  if (codes.includes('AbortError')) return 'aborted';
  return 'other';
}

function summary(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

/** The fix for a misconfiguration, or `undefined` when the failure is not one. */
function misconfiguration(kind: FailureKind, queueUrl: string, error: unknown): string | undefined {
  switch (kind) {
    case 'queue-missing':
      return `SQS queue ${queueUrl} does not exist (${summary(error)}). Create it (a FIFO queue's name ends in .fifo and needs FifoQueue=true) or fix sqsRelay.queueUrl; check the client's region and endpoint too.`;
    case 'credentials':
      return `SQS rejected the client's credentials for ${queueUrl} (${summary(error)}). Give the SQSClient valid credentials (environment, profile or role) for the queue's account and region.`;
    case 'access-denied':
      return `SQS denied access to ${queueUrl} (${summary(error)}). Allow sqs:GetQueueAttributes and sqs:SendMessage on the queue (and kms:GenerateDataKey and kms:Decrypt for a KMS-encrypted queue).`;
    default:
      return undefined;
  }
}

/** A 4xx that is not throttling: asking again the same way will get the same answer. */
function refusedRequest(error: unknown): boolean {
  const { $fault, $retryable } = (error ?? {}) as { $fault?: unknown; $retryable?: { throttling?: boolean } };
  return (
    $fault === 'client' &&
    $retryable?.throttling !== true &&
    !errorCodes(error).some((c) => /throttl/i.test(c))
  );
}

/**
 * The fix for an error of the queue check (GetQueueAttributes), or `undefined` when it is a
 * passing failure (network, throttling, 5xx). Any other refused request counts as misconfigured
 * there: retrying the check would otherwise hold every delivery back forever without saying why.
 */
function checkMisconfiguration(error: unknown, queueUrl: string): string | undefined {
  const fix = misconfiguration(failureKind(error), queueUrl, error);
  if (fix !== undefined || !refusedRequest(error)) return fix;
  return `SQS refused GetQueueAttributes on ${queueUrl} (${summary(error)}). Check sqsRelay.queueUrl and the client's region and endpoint.`;
}

/**
 * For an error of the queue check in `start()`: the RELAY_MISCONFIGURED error to throw, or
 * `undefined` for a passing failure (network, throttling, 5xx), after which the check is repeated
 * before the next delivery instead of failing the application's start.
 */
export function startFailure(error: unknown, queueUrl: string): OutboxerError | undefined {
  const fix = checkMisconfiguration(error, queueUrl);
  return fix === undefined ? undefined : new OutboxerError('RELAY_MISCONFIGURED', fix, { cause: error });
}

/** For an error of the queue check before a delivery: always retryable, misconfigured or not. */
export function checkFailure(error: unknown, queueUrl: string): OutboxerError {
  const fix = checkMisconfiguration(error, queueUrl);
  if (fix !== undefined)
    return new OutboxerError('RELAY_MISCONFIGURED', fix, { cause: error, retryable: true });
  return new DeliveryError(`Could not reach SQS queue ${queueUrl}: ${summary(error)}`, { cause: error });
}

/**
 * For a SendMessageBatch call that threw (nothing of it is known to have arrived). Retryable,
 * except a single message that SQS refused as too long.
 */
export function callFailure(error: unknown, queueUrl: string, entries: number, signal: AbortSignal): unknown {
  const kind = failureKind(error);
  if (kind === 'aborted' && signal.aborted) return signal.reason;
  const fix = misconfiguration(kind, queueUrl, error);
  if (fix !== undefined)
    return new OutboxerError('RELAY_MISCONFIGURED', fix, { cause: error, retryable: true });
  if (kind === 'too-long' && entries === 1) {
    return new PermanentError(
      `SQS refused the message as too long (${summary(error)}). Publish a reference to data stored elsewhere (S3) instead.`,
      { cause: error },
    );
  }
  return new DeliveryError(`SendMessageBatch to ${queueUrl} failed: ${summary(error)}`, { cause: error });
}

/** For a `Failed[]` entry of a 200 response: SenderFault means for good, unless time can cure it. */
export function entryFailure(failed: SqsFailedEntry, messageId: number): DeliveryError {
  const text = `SQS rejected message ${messageId}: ${failed.code}${failed.message ? `: ${failed.message}` : ''}`;
  if (failed.senderFault && !RETRYABLE_ENTRY_CODE.test(failed.code)) return new PermanentError(text);
  return new DeliveryError(text);
}
