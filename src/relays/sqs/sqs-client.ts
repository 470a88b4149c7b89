/**
 * The few parts of `@aws-sdk/client-sqs` (v3) the relay uses, described structurally so that
 * `outboxer/sqs` imports nothing from the SDK when it is loaded.
 */
import { OutboxerError } from '../../core/errors.js';

/** A String message attribute: the only kind the relay sends. */
export interface SqsStringAttribute {
  DataType: 'String';
  StringValue: string;
}

/** One entry of a SendMessageBatch call, as the relay builds it. */
export interface SqsBatchEntry {
  /** `[A-Za-z0-9_-]{1,80}`, unique within the call: the outbox id. */
  Id: string;
  MessageBody: string;
  MessageAttributes?: Record<string, SqsStringAttribute>;
  MessageGroupId?: string;
  MessageDeduplicationId?: string;
}

/** Input of `SendMessageBatchCommand`, as far as the relay fills it. */
export interface SqsSendMessageBatchInput {
  QueueUrl: string;
  Entries: SqsBatchEntry[];
}

/** Input of `GetQueueAttributesCommand`, as far as the relay fills it. */
export interface SqsGetQueueAttributesInput {
  QueueUrl: string;
  // 'All': AWS refuses to name FifoQueue for a standard queue (InvalidAttributeName).
  AttributeNames: Array<'All'>;
}

/**
 * The part of an `SQSClient` the relay calls: `send(command, { abortSignal })`. Pass your own
 * client; the relay never creates, configures or destroys it.
 *
 * @example
 * import { SQSClient } from '@aws-sdk/client-sqs';
 * const client: SqsClientLike = new SQSClient({ region: 'eu-west-1' });
 */
export interface SqsClientLike {
  // Method syntax on purpose: SQSClient's generic, overloaded `send` is assignable to it.
  send(command: unknown, options?: { abortSignal?: AbortSignal }): Promise<unknown>;
}

/**
 * The two command classes the relay builds requests with. The module namespace of
 * `@aws-sdk/client-sqs` has them, so `import * as sqs from '@aws-sdk/client-sqs'` and passing
 * `commands: sqs` works. Default: loaded with a dynamic `import('@aws-sdk/client-sqs')` in
 * `start()`.
 *
 * @example
 * import * as sqs from '@aws-sdk/client-sqs';
 * sqsRelay({ client: new sqs.SQSClient({}), queueUrl, commands: sqs });
 */
export interface SqsCommands {
  SendMessageBatchCommand: new (input: SqsSendMessageBatchInput) => unknown;
  GetQueueAttributesCommand: new (input: SqsGetQueueAttributesInput) => unknown;
}

/** What the relay reads from a SendMessageBatch response. */
export interface SqsBatchResult {
  readonly successful: ReadonlySet<string>;
  readonly failed: ReadonlyMap<string, SqsFailedEntry>;
}

/** A `Failed[]` entry of a SendMessageBatch response (a 200 response can carry them). */
export interface SqsFailedEntry {
  readonly id: string;
  readonly senderFault: boolean;
  readonly code: string;
  readonly message: string;
}

// A variable specifier keeps bundlers from inlining the SDK into outboxer's build.
const SDK_MODULE = '@aws-sdk/client-sqs';

/** True for an object with both command classes (the SDK's module namespace is one). */
export function isSqsCommands(value: unknown): value is SqsCommands {
  const candidate = value as Partial<Record<keyof SqsCommands, unknown>> | null;
  return (
    typeof candidate === 'object' &&
    candidate !== null &&
    typeof candidate.SendMessageBatchCommand === 'function' &&
    typeof candidate.GetQueueAttributesCommand === 'function'
  );
}

/** Loads the command classes from the installed SDK; RELAY_MISCONFIGURED when it is not there. */
export async function importSqsCommands(): Promise<SqsCommands> {
  let loaded: unknown;
  try {
    loaded = await import(SDK_MODULE);
  } catch (error) {
    throw new OutboxerError(
      'RELAY_MISCONFIGURED',
      `outboxer/sqs could not load ${SDK_MODULE} (${(error as Error).message}). Install it (npm install ${SDK_MODULE}) or pass its command classes: sqsRelay({ ..., commands: await import('${SDK_MODULE}') }).`,
      { cause: error },
    );
  }
  // A CommonJS module imported from ESM may keep its exports under `default`.
  const namespace = loaded as { default?: unknown };
  const commands = isSqsCommands(namespace) ? namespace : namespace.default;
  if (!isSqsCommands(commands)) {
    throw new OutboxerError(
      'RELAY_MISCONFIGURED',
      `${SDK_MODULE} was loaded but has no SendMessageBatchCommand/GetQueueAttributesCommand: install version 3 of the AWS SDK.`,
    );
  }
  return commands;
}

/** Reads `Successful[]` and `Failed[]` of a SendMessageBatch response without trusting its shape. */
export function readBatchResult(output: unknown): SqsBatchResult {
  const { Successful, Failed } = (output ?? {}) as { Successful?: unknown; Failed?: unknown };
  const successful = new Set<string>();
  const failed = new Map<string, SqsFailedEntry>();
  for (const entry of Array.isArray(Successful) ? Successful : []) {
    const id = (entry as { Id?: unknown }).Id;
    if (typeof id === 'string') successful.add(id);
  }
  for (const entry of Array.isArray(Failed) ? Failed : []) {
    const { Id, SenderFault, Code, Message } = entry as Record<string, unknown>;
    if (typeof Id !== 'string') continue;
    failed.set(Id, {
      id: Id,
      senderFault: SenderFault === true,
      code: typeof Code === 'string' ? Code : 'Unknown',
      message: typeof Message === 'string' ? Message : '',
    });
  }
  return { successful, failed };
}
