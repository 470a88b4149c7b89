/**
 * The NATS JetStream receiver: a message of a JetStream consumer becomes one inbox call in the
 * consumer's transaction; it is acked after that transaction committed, and nak'ed (delivered
 * again) when it failed. Structural: nothing of `@nats-io/*` is imported.
 */
import {
  InboxReceiver,
  type ReceivedMessage,
  type ReceiveOutcome,
  type ReceiverOptions,
} from '../../core/inbox/receiver.js';
import { integerOption } from '../../core/options.js';
import { OrderedLanes } from '../shared/lanes.js';
import { settleInOrder } from '../shared/settle.js';

/** What the receiver uses of a `JsMsg` (`@nats-io/jetstream` 3.x). */
export interface JetStreamMessageLike {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly headers?: { keys(): string[]; get(key: string): string } | undefined;
  ack(): void;
  nak(millis?: number): void;
}

/**
 * Options of {@link natsReceiver}: those of every receiver, and more.
 *
 * @example
 * const receive = natsReceiver({ outboxer, inbox: 'shipping', transaction, handler });
 * for await (const message of await consumer.consume()) await receive(message);
 */
export type NatsReceiverOptions<
  Raw,
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
> = ReceiverOptions<ReceivedMessage<Raw>, OutboxerTx, Sync, Tx, Raw> & NatsReceiverOwnOptions;

/** What {@link natsReceiver} takes besides the options of every receiver. */
export interface NatsReceiverOwnOptions {
  /** Milliseconds before a message that failed is delivered again (`nak(delay)`). Default 0. */
  nakDelay?: number;
}

const WHAT = 'natsReceiver';

/**
 * A receiver for JetStream messages of a consumer with explicit acks (the default of
 * `consumers.add`): `await receive(message)` handles the message once in your transaction, then
 * acks it; a message that fails is nak'ed (delivered again after `nakDelay`) and logged through
 * the instance's logger. The messages of one group (`outboxer-group-key`) are handled one after
 * another in outbox id order, and those waiting behind a failure are nak'ed with it, in order; other
 * groups go on in parallel when you call it without awaiting. Resolves to a settled result, never
 * rejects.
 *
 * @example
 * const messages = await js.consumers.get('ORDERS', 'shipping').then((c) => c.consume());
 * for await (const message of messages) await receive(message);
 */
export function natsReceiver<
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
  Raw extends JetStreamMessageLike = JetStreamMessageLike,
>(
  options: NatsReceiverOptions<Raw, OutboxerTx, Sync, Tx>,
): (message: Raw) => Promise<PromiseSettledResult<ReceiveOutcome>> {
  const receiver = new InboxReceiver<ReceivedMessage<Raw>, Sync, Raw>(WHAT, options, ['nakDelay']);
  const nakDelay = integerOption(`${WHAT}.nakDelay`, options.nakDelay, 0, 0, 86_400_000);
  const lanes = new OrderedLanes();

  return (message) => {
    const headers: Record<string, string> = {};
    for (const key of message.headers?.keys() ?? []) headers[key] = message.headers!.get(key);
    return settleInOrder(
      receiver,
      lanes,
      message,
      { headers, body: message.data, destination: message.subject },
      {
        acknowledge: () => message.ack(),
        giveBack: () => (nakDelay > 0 ? message.nak(nakDelay) : message.nak()),
      },
    );
  };
}
