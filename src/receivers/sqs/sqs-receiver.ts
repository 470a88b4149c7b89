/**
 * The SQS receiver: a message received from a queue becomes one inbox call in the consumer's
 * transaction, and it is deleted from the queue (SQS's acknowledgement) only after that
 * transaction committed. A message that fails is left alone: it becomes visible again after the
 * queue's visibility timeout and is received again (or goes to the dead-letter queue after
 * `maxReceiveCount`). Structural: nothing of the AWS SDK is imported when `outboxer/sqs` loads.
 */
import { OutboxerError } from '../../core/errors.js';
import {
  InboxReceiver,
  type ReceivedMessage,
  type ReceiveOutcome,
  type ReceiverOptions,
} from '../../core/inbox/receiver.js';
import { invalidOption } from '../../core/options.js';
import { importSqsCommands, type SqsClientLike } from '../../relays/sqs/sqs-client.js';
import { PACKED_HEADERS_ATTRIBUTE } from '../../relays/sqs/sqs-message.js';
import { OrderedLanes } from '../shared/lanes.js';
import { identityOf, receivedMessage } from '../shared/received.js';

/** What the receiver uses of a message of `ReceiveMessageCommand`'s `Messages`. */
export interface SqsReceivedMessageLike {
  readonly MessageId?: string | undefined;
  readonly ReceiptHandle?: string | undefined;
  readonly Body?: string | undefined;
  /** System attributes; on a FIFO queue `MessageGroupId` keeps a group's messages in order. */
  readonly Attributes?: Readonly<Partial<Record<string, string>>> | undefined;
  readonly MessageAttributes?:
    | Readonly<
        Record<string, { readonly StringValue?: string | undefined; readonly DataType?: string | undefined }>
      >
    | undefined;
}

/** The command class the receiver deletes with; `@aws-sdk/client-sqs`'s namespace has it. */
export interface SqsDeleteCommands {
  DeleteMessageCommand: new (input: { QueueUrl: string; ReceiptHandle: string }) => unknown;
}

/**
 * Options of {@link sqsReceiver}: those of every receiver, the client and the queue.
 *
 * @example
 * sqsReceiver({ outboxer, inbox: 'orders', client: new SQSClient({}), queueUrl,
 *   transaction: (work) => prisma.$transaction(work),
 *   handler: async (message, tx) => { await tx.shipment.create({ data: message.payload as never }); } });
 */
export type SqsReceiverOptions<
  Raw,
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
> = ReceiverOptions<ReceivedMessage<Raw>, OutboxerTx, Sync, Tx, Raw> & SqsReceiverOwnOptions;

/** What {@link sqsReceiver} takes besides the options of every receiver. */
export interface SqsReceiverOwnOptions {
  /** Your `SQSClient`, used to delete each message once handled. */
  client: SqsClientLike;
  /** The queue the messages were received from (their receipt handles belong to it). */
  queueUrl: string;
  /** `import * as sqs from '@aws-sdk/client-sqs'`. Default: loaded at the first delete. */
  commands?: SqsDeleteCommands;
}

const WHAT = 'sqsReceiver';

/**
 * A receiver for what `ReceiveMessageCommand` returned (ask for `MessageAttributeNames: ['All']`,
 * where outboxer's id travels, and on a FIFO queue `MessageSystemAttributeNames: ['All']`, where
 * the group is). `await receive(Messages)` handles each message once in your transaction, then
 * deletes it from the queue; a message that fails is not deleted, and SQS delivers it again after
 * its visibility timeout. It resolves to one settled result per message, in the order given.
 *
 * Order: on a FIFO queue the messages of one group are handled one after another, and once one
 * fails the rest of its group in this batch is left in the queue too (refused with
 * `INVALID_STATE`), since handling them would overtake it; other groups go on, in parallel. A
 * batch from a FIFO queue received without its `MessageGroupId`s is handled as one group. On a
 * standard queue every message is handled in parallel.
 *
 * @example
 * const receive = sqsReceiver({ outboxer, inbox: 'orders', client, queueUrl, transaction, handler });
 * const { Messages = [] } = await client.send(new ReceiveMessageCommand({
 *   QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 20,
 *   MessageAttributeNames: ['All'], MessageSystemAttributeNames: ['All'],
 * }));
 * for (const result of await receive(Messages))
 *   if (result.status === 'rejected') log.warn('not handled, SQS delivers it again', result.reason);
 */
export function sqsReceiver<
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
  Raw extends SqsReceivedMessageLike = SqsReceivedMessageLike,
>(
  options: SqsReceiverOptions<Raw, OutboxerTx, Sync, Tx>,
): (messages: readonly Raw[]) => Promise<Array<PromiseSettledResult<ReceiveOutcome>>> {
  const receiver = new InboxReceiver<ReceivedMessage<Raw>, Sync, Raw>(WHAT, options, [
    'client',
    'queueUrl',
    'commands',
  ]);
  if (typeof options.client?.send !== 'function')
    throw invalidOption(`${WHAT}.client`, 'an SQSClient', options.client);
  const queue = queueName(options.queueUrl);
  const queueUrl = options.queueUrl;
  const fifo = queue.endsWith('.fifo');
  let commands: Promise<SqsDeleteCommands> | undefined =
    options.commands === undefined ? undefined : Promise.resolve(checkCommands(options.commands));
  const lanes = new OrderedLanes();
  let batches = 0;

  async function receiveOne(message: Raw): Promise<ReceiveOutcome> {
    // Checked first: a message handled but impossible to delete would only come back as a duplicate.
    const receipt = message.ReceiptHandle;
    if (typeof receipt !== 'string')
      throw invalidOption(`${WHAT}(message).ReceiptHandle`, 'the handle ReceiveMessage returned', receipt);
    const headers = attributesOf(message);
    const identity = identityOf(headers, queue, receiver.source);
    const hint =
      message.MessageAttributes === undefined
        ? "it came without message attributes (another producer's, or received without MessageAttributeNames: ['All'])"
        : undefined;
    const outcome = await receiver.receive(
      message,
      identity,
      (id) => receivedMessage(message, id, identity, headers, message.Body),
      hint,
    );
    commands ??= importSqsCommands().then(checkCommands);
    const { DeleteMessageCommand } = await commands;
    // After the commit, and only then: SQS's acknowledgement.
    await options.client.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: receipt }));
    return outcome;
  }

  return (messages) => {
    if (!Array.isArray(messages))
      throw invalidOption(`${WHAT}(messages)`, 'the Messages array ReceiveMessage returned', messages);
    // Lanes of this batch only: a later batch holds a group's next messages only once SQS saw
    // these deleted or their visibility end.
    const batch = ++batches;
    return Promise.allSettled(
      messages.map((message: Raw, index) => {
        const lane = fifo ? (message.Attributes?.MessageGroupId ?? '') : `${index}`;
        return lanes.run(`${batch}/${lane}`, BigInt(index), () => receiveOne(message), refused);
      }),
    );
  };
}

function refused(): OutboxerError {
  return new OutboxerError(
    'INVALID_STATE',
    `${WHAT} left this message in the queue: an earlier message of its FIFO group in this batch failed, and handling this one first would break the group's order. SQS delivers both again after their visibility timeout.`,
  );
}

function queueName(queueUrl: unknown): string {
  let name: string | undefined;
  try {
    name = new URL(String(queueUrl)).pathname.split('/').filter(Boolean).pop();
  } catch {
    name = undefined;
  }
  if (typeof queueUrl !== 'string' || name === undefined)
    throw invalidOption(`${WHAT}.queueUrl`, 'the URL of the queue the messages come from', queueUrl);
  return name;
}

function checkCommands(commands: unknown): SqsDeleteCommands {
  const namespace = commands as {
    DeleteMessageCommand?: unknown;
    default?: { DeleteMessageCommand?: unknown };
  };
  const found = typeof namespace?.DeleteMessageCommand === 'function' ? namespace : namespace?.default;
  if (typeof found?.DeleteMessageCommand !== 'function') {
    throw new OutboxerError(
      'INVALID_OPTIONS',
      `${WHAT} needs DeleteMessageCommand of @aws-sdk/client-sqs v3: pass commands: await import('@aws-sdk/client-sqs').`,
    );
  }
  return found as SqsDeleteCommands;
}

/**
 * The String attributes as headers. The relay packs a message's own headers into one JSON
 * attribute when they do not fit SQS's ten: they are unpacked here, outboxer's own kept on top.
 */
function attributesOf(message: SqsReceivedMessageLike): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, attribute] of Object.entries(message.MessageAttributes ?? {})) {
    if (typeof attribute?.StringValue === 'string') headers[name] = attribute.StringValue;
  }
  const packed = headers[PACKED_HEADERS_ATTRIBUTE];
  if (packed === undefined) return headers;
  try {
    const own = JSON.parse(packed) as Record<string, unknown>;
    const unpacked = Object.fromEntries(
      Object.entries(own).filter(([, v]) => typeof v === 'string'),
    ) as Record<string, string>;
    delete headers[PACKED_HEADERS_ATTRIBUTE];
    return { ...unpacked, ...headers };
  } catch {
    return headers; // not ours after all: left as it came
  }
}
