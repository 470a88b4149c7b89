import { OutboxerError } from '../../core/errors.js';
import type { DeliveryContext, DeliveryOutcome, Envelope, Relay } from '../../core/relay.js';
import { importSqsCommands, type SqsBatchEntry, type SqsCommands } from './sqs-client.js';
import { checkFailure, startFailure } from './sqs-errors.js';
import { prepareEntry, SQS_LIMITS } from './sqs-message.js';
import { resolveSqsOptions, type ResolvedSqsOptions, type SqsRelayOptions } from './sqs-options.js';
import { deliverInRounds } from './sqs-rounds.js';

/**
 * A relay to an Amazon SQS queue through your own `SQSClient` (`@aws-sdk/client-sqs` v3, an
 * optional peer dependency: `outboxer/sqs` loads nothing of it at import time).
 *
 * - FIFO queue (URL ending in `.fifo`): order per group key is kept. MessageGroupId is the group
 *   key (the outbox id for a message without one), MessageDeduplicationId the outbox id, so a
 *   redelivery within SQS's 5-minute window is dropped by SQS.
 * - Standard queue: SQS does not keep order (nor exactly-once); the relay still sends in id order.
 *
 * Messages go out with SendMessageBatch, at most 10 and 1 MiB per call, never two messages of one
 * group in one call. Headers travel as String message attributes (`outboxer-id`, `outboxer-outbox`,
 * `outboxer-type`, `outboxer-group-key` and your own; see the docs for more than 10).
 * `start()` checks the queue with GetQueueAttributes and throws RELAY_MISCONFIGURED when it does
 * not exist or the credentials are refused. Needs `sqs:SendMessage` and `sqs:GetQueueAttributes`.
 *
 * @example
 * import { SQSClient } from '@aws-sdk/client-sqs';
 * import { sqsRelay } from 'outboxer/sqs';
 * const relay = sqsRelay({
 *   client: new SQSClient({ region: 'eu-west-1' }),
 *   queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo',
 * });
 * const outboxer = new Outboxer({ database, outboxes: { orders: { relay } } });
 */
export function sqsRelay(options: SqsRelayOptions): Relay {
  return new SqsRelay(resolveSqsOptions(options));
}

/** What the queue check learnt. */
interface QueueFacts {
  readonly maxMessageBytes: number;
}

class SqsRelay implements Relay {
  readonly name: string;
  private commands: SqsCommands | undefined;
  private queue: QueueFacts | undefined;

  constructor(private readonly options: ResolvedSqsOptions) {
    this.name = options.name;
    this.commands = options.commands;
  }

  async start(): Promise<void> {
    this.commands ??= await importSqsCommands();
    try {
      this.queue = await this.checkQueue();
    } catch (error) {
      if (error instanceof OutboxerError && error.code === 'RELAY_MISCONFIGURED') throw error;
      // SQS unreachable for now (network, throttling, 5xx): an outbox exists to ride that out, so
      // the application starts and the check is repeated before the next delivery.
      const fatal = startFailure(error, this.options.queueUrl);
      if (fatal !== undefined) throw fatal;
    }
  }

  async deliver(batch: readonly Envelope[], context: DeliveryContext): Promise<DeliveryOutcome[]> {
    const { commands, queue } = await this.ready();
    const { client, queueUrl, concurrency } = this.options;
    return deliverInRounds(batch, context, {
      queueUrl,
      concurrency,
      prepare: (envelope) => prepareEntry(envelope, this.options, context, queue.maxMessageBytes),
      sendBatch: (entries: SqsBatchEntry[]) =>
        client.send(new commands.SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }), {
          abortSignal: context.signal,
        }),
    });
  }

  /** The client belongs to the caller, who destroys it: nothing to release here. */
  async stop(): Promise<void> {}

  /** Commands and queue facts, checking the queue now if `start()` could not. Throws retryable errors. */
  private async ready(): Promise<{ commands: SqsCommands; queue: QueueFacts }> {
    if (this.commands !== undefined && this.queue !== undefined)
      return { commands: this.commands, queue: this.queue };
    try {
      this.commands ??= await importSqsCommands();
      this.queue = await this.checkQueue();
    } catch (error) {
      if (error instanceof OutboxerError && error.code === 'RELAY_MISCONFIGURED') {
        throw new OutboxerError('RELAY_MISCONFIGURED', error.message, {
          cause: error.cause,
          retryable: true,
        });
      }
      throw checkFailure(error, this.options.queueUrl);
    }
    return { commands: this.commands, queue: this.queue };
  }

  /** GetQueueAttributes: the queue exists, the credentials work, FIFO-ness matches the URL. */
  private async checkQueue(): Promise<QueueFacts> {
    const { client, queueUrl, fifo } = this.options;
    const command = new this.commands!.GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['All'],
    });
    const output = (await client.send(command)) as
      { Attributes?: Record<string, string | undefined> } | undefined;
    const attributes = output?.Attributes ?? {};
    if ((attributes.FifoQueue === 'true') !== fifo) {
      throw new OutboxerError(
        'RELAY_MISCONFIGURED',
        `SQS queue ${queueUrl} is ${fifo ? 'not a FIFO queue although its URL ends in .fifo' : 'a FIFO queue although its URL does not end in .fifo'}; use the URL that GetQueueUrl returns.`,
      );
    }
    return { maxMessageBytes: queueLimit(attributes.MaximumMessageSize) };
  }
}

/** The queue's own MaximumMessageSize when it reports one (ElasticMQ does not), capped at SQS's. */
function queueLimit(value: string | undefined): number {
  const configured = Number(value);
  return Number.isSafeInteger(configured) && configured > 0
    ? Math.min(configured, SQS_LIMITS.messageBytes)
    : SQS_LIMITS.messageBytes;
}
