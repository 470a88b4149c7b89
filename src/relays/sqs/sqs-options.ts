import { integerOption, invalidOption, rejectUnknownKeys } from '../../core/options.js';
import type { DeliveryContext, Envelope } from '../../core/relay.js';
import { payloadJson } from '../../core/payload.js';
import { isSqsCommands, type SqsClientLike, type SqsCommands } from './sqs-client.js';

/**
 * Options of {@link sqsRelay}. Only `client` and `queueUrl` are required.
 *
 * @example
 * sqsRelay({
 *   client: new SQSClient({ region: 'eu-west-1' }),
 *   queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo',
 *   messageGroupId: (m) => m.groupKey ?? 'ungrouped', // one shared group for unkeyed messages
 * });
 */
export interface SqsRelayOptions {
  /** Your `SQSClient` (region, credentials, endpoint are yours to set). The relay never destroys it. */
  client: SqsClientLike;
  /**
   * The queue URL, e.g. `https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo`. A URL
   * ending in `.fifo` is a FIFO queue: messages get a MessageGroupId and a MessageDeduplicationId.
   */
  queueUrl: string;
  /**
   * The SDK's command classes, e.g. `import * as sqs from '@aws-sdk/client-sqs'` then
   * `commands: sqs`. Default: `import('@aws-sdk/client-sqs')` in `start()`.
   */
  commands?: SqsCommands;
  /**
   * MessageGroupId of a message. Default for FIFO queues: see {@link defaultMessageGroupId} (the
   * group key; the outbox id for a message without one; the outbox name in `'total'` ordering).
   * On a standard queue nothing is sent unless you set this (SQS fair queues). A value that is not
   * 1–128 printable ASCII characters is replaced by a hash of it.
   */
  messageGroupId?: (envelope: Envelope, context: DeliveryContext) => string;
  /**
   * MessageDeduplicationId (FIFO only). Default: the outbox id, `String(envelope.id)`. Change it
   * when two outbox tables send to one FIFO queue, since their ids overlap:
   * `(m) => \`${m.outbox}-${m.id}\``.
   */
  deduplicationId?: (envelope: Envelope) => string;
  /** The message body. Default: `JSON.stringify(envelope.payload)`. */
  body?: (envelope: Envelope) => string;
  /** SendMessageBatch calls in flight at once (they never hold two messages of one group). Default 4. */
  concurrency?: number;
  /** Shown in logs and telemetry. Default `'sqs'`. */
  name?: string;
}

/** {@link SqsRelayOptions} after validation, with defaults filled in and frozen. */
export interface ResolvedSqsOptions {
  readonly client: SqsClientLike;
  readonly queueUrl: string;
  readonly fifo: boolean;
  readonly commands: SqsCommands | undefined;
  readonly messageGroupId: SqsRelayOptions['messageGroupId'];
  readonly deduplicationId: SqsRelayOptions['deduplicationId'];
  readonly body: (envelope: Envelope) => string;
  readonly concurrency: number;
  readonly name: string;
}

const KEYS = [
  'client',
  'queueUrl',
  'commands',
  'messageGroupId',
  'deduplicationId',
  'body',
  'concurrency',
  'name',
] as const;

/** Validates the options once, in the factory. */
export function resolveSqsOptions(raw: unknown): ResolvedSqsOptions {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw invalidOption('sqsRelay(options)', 'an object { client, queueUrl, ... }', raw);
  }
  const options = raw as Record<string, unknown>;
  rejectUnknownKeys('sqsRelay', options, KEYS);
  const client = options.client as SqsClientLike | undefined;
  if (typeof client !== 'object' || client === null || typeof client.send !== 'function') {
    throw invalidOption(
      'sqsRelay.client',
      'an SQSClient from @aws-sdk/client-sqs (an object with a send(command) method)',
      client,
    );
  }
  const queueUrl = checkQueueUrl(options.queueUrl);
  const fifo = new URL(queueUrl).pathname.endsWith('.fifo');
  if (options.commands !== undefined && !isSqsCommands(options.commands)) {
    throw invalidOption(
      'sqsRelay.commands',
      "the module of @aws-sdk/client-sqs (import * as sqs from '@aws-sdk/client-sqs') or { SendMessageBatchCommand, GetQueueAttributesCommand }",
      options.commands,
    );
  }
  const messageGroupId = optionalFunction(
    'messageGroupId',
    options.messageGroupId,
  ) as ResolvedSqsOptions['messageGroupId'];
  const deduplicationId = optionalFunction(
    'deduplicationId',
    options.deduplicationId,
  ) as ResolvedSqsOptions['deduplicationId'];
  if (deduplicationId !== undefined && !fifo) {
    throw invalidOption(
      'sqsRelay.deduplicationId',
      'left out for a standard queue (deduplication ids are for FIFO queues, whose URL ends in .fifo)',
      'a function',
    );
  }
  const body =
    (optionalFunction('body', options.body) as ResolvedSqsOptions['body'] | undefined) ?? payloadJson;
  const name = options.name ?? 'sqs';
  if (typeof name !== 'string' || name.length === 0)
    throw invalidOption('sqsRelay.name', 'a non-empty string', name);
  return Object.freeze({
    client,
    queueUrl,
    fifo,
    commands: options.commands as SqsCommands | undefined,
    messageGroupId,
    deduplicationId,
    body,
    concurrency: integerOption('sqsRelay.concurrency', options.concurrency, 4, 1, 50),
    name,
  });
}

function checkQueueUrl(value: unknown): string {
  const accepted =
    'a queue URL such as https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo (GetQueueUrl returns it)';
  if (typeof value !== 'string') throw invalidOption('sqsRelay.queueUrl', accepted, value);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalidOption('sqsRelay.queueUrl', accepted, value);
  }
  if (
    (url.protocol !== 'https:' && url.protocol !== 'http:') ||
    url.pathname.split('/').filter(Boolean).length === 0
  ) {
    throw invalidOption('sqsRelay.queueUrl', accepted, value);
  }
  return value;
}

function optionalFunction(option: string, value: unknown): ((...args: never[]) => unknown) | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'function') throw invalidOption(`sqsRelay.${option}`, 'a function', value);
  return value as (...args: never[]) => unknown;
}
