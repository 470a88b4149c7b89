/**
 * The RabbitMQ receiver: an amqplib delivery becomes one inbox call in the consumer's transaction;
 * it is acked after that transaction committed, and nacked (requeued) when it failed.
 * Structural: nothing of amqplib is imported.
 */
import {
  InboxReceiver,
  type ReceivedMessage,
  type ReceiveOutcome,
  type ReceiverOptions,
} from '../../core/inbox/receiver.js';
import { booleanOption, invalidOption } from '../../core/options.js';
import { OrderedLanes } from '../shared/lanes.js';
import { headersOf } from '../shared/received.js';
import { settleInOrder } from '../shared/settle.js';

/** What the receiver uses of an amqplib `ConsumeMessage`. */
export interface AmqpDeliveryLike {
  readonly content: Buffer;
  readonly fields: { readonly exchange: string; readonly routingKey: string };
  readonly properties: { readonly headers?: Readonly<Record<string, unknown>> | undefined };
}

/** What the receiver uses of the amqplib channel the messages are consumed on. */
export interface AmqpConsumeChannelLike {
  ack(message: never): void;
  nack(message: never, allUpTo?: boolean, requeue?: boolean): void;
}

/**
 * Options of {@link rabbitmqReceiver}: those of every receiver, the channel, and more.
 *
 * @example
 * await channel.consume('shipping', rabbitmqReceiver({ outboxer, inbox: 'shipping', channel, transaction, handler }));
 */
export type RabbitMqReceiverOptions<
  Raw,
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
> = ReceiverOptions<ReceivedMessage<Raw>, OutboxerTx, Sync, Tx, Raw> & RabbitMqReceiverOwnOptions;

/** What {@link rabbitmqReceiver} takes besides the options of every receiver. */
export interface RabbitMqReceiverOwnOptions {
  /** The channel the messages are consumed on (with `noAck: false`): the acks go there. */
  channel: AmqpConsumeChannelLike;
  /**
   * Requeue a message that failed (`nack(message, false, true)`), so that it is delivered again.
   * `false` drops it, or dead-letters it when the queue has a dead-letter exchange. Default true.
   */
  requeue?: boolean;
}

const WHAT = 'rabbitmqReceiver';

/**
 * A consume callback for amqplib: `channel.consume(queue, rabbitmqReceiver({ … }))` with the
 * default `noAck: false`. Each delivery is handled once in your transaction, then acked; a
 * delivery that fails is nacked and requeued (`requeue`), and logged through the instance's
 * logger. The messages of one group (`outboxer-group-key`) are handled one after another in outbox
 * id order, and those that wait behind a failure are requeued with it; other groups go on in
 * parallel, up to the channel's `prefetch`. Resolves to a settled result (undefined for the `null`
 * amqplib passes when the broker cancels the consumer), never rejects.
 *
 * @example
 * await channel.prefetch(20);
 * await channel.consume('shipping', rabbitmqReceiver({ outboxer, inbox: 'shipping', channel, transaction, handler }));
 */
export function rabbitmqReceiver<
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
  Raw extends AmqpDeliveryLike = AmqpDeliveryLike,
>(
  options: RabbitMqReceiverOptions<Raw, OutboxerTx, Sync, Tx>,
): (message: Raw | null) => Promise<PromiseSettledResult<ReceiveOutcome> | undefined> {
  const receiver = new InboxReceiver<ReceivedMessage<Raw>, Sync, Raw>(WHAT, options, ['channel', 'requeue']);
  const { channel } = options;
  if (typeof channel?.ack !== 'function' || typeof channel.nack !== 'function')
    throw invalidOption(`${WHAT}.channel`, 'the amqplib channel the messages are consumed on', channel);
  const requeue = booleanOption(`${WHAT}.requeue`, options.requeue, true);
  const lanes = new OrderedLanes();

  return async (message) => {
    if (message === null) return undefined; // the broker cancelled the consumer
    return settleInOrder(
      receiver,
      lanes,
      message,
      {
        headers: headersOf(message.properties.headers),
        body: message.content,
        // The exchange; for the default exchange (''), the routing key: the queue's name.
        destination: message.fields.exchange || message.fields.routingKey,
      },
      {
        acknowledge: () => channel.ack(message as never),
        giveBack: () => channel.nack(message as never, false, requeue),
      },
    );
  };
}
