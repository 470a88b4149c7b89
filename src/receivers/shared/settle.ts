/**
 * For the brokers that acknowledge each message on its own (RabbitMQ, NATS JetStream, Redis
 * Streams): the messages of one group run one after another (their lane is the group key, their
 * position the outbox id, which the relays send in order), the broker is acknowledged after the
 * commit, and a message that fails, or waits behind one that failed, is given back for
 * redelivery. The result is settled, never a rejection: a broker's consume callback has nobody to
 * give a rejection to, so the failure is logged through the instance's logger instead.
 */
import { describeError, OutboxerError } from '../../core/errors.js';
import type {
  InboxReceiver,
  ReceivedIdentity,
  ReceivedMessage,
  ReceiveOutcome,
} from '../../core/inbox/receiver.js';
import type { OrderedLanes } from './lanes.js';
import { identityOf, receivedMessage } from './received.js';

/** How a receiver tells its broker what became of a message. */
export interface Settlement {
  /** After the commit: the message is done. */
  acknowledge(): unknown;
  /** After a failure: deliver it again (now or later, as the broker does). */
  giveBack(): unknown;
}

let unordered = 0;

/** What a receiver read off a delivery: its headers, its body, and where it came from. */
export interface DeliveryParts {
  readonly headers: Readonly<Record<string, string>>;
  readonly body: unknown;
  /** The topic, queue, subject or stream: the source of a message without `outboxer-outbox`. */
  readonly destination: string;
}

/**
 * Handles `raw` through `receiver` in its group's lane, then acknowledges it, or gives it back
 * and logs why.
 */
export async function settleInOrder<Raw>(
  receiver: InboxReceiver<ReceivedMessage<Raw>, boolean, Raw>,
  lanes: OrderedLanes,
  raw: Raw,
  parts: DeliveryParts,
  settlement: Settlement,
): Promise<PromiseSettledResult<ReceiveOutcome>> {
  const { what, logger } = receiver;
  const identity = identityOf(parts.headers, parts.destination, receiver.source);
  // Outbox ids grow along a group; a message without a group or an id has no order to keep.
  const position =
    identity.id !== undefined && /^\d{1,19}$/.test(identity.id) ? BigInt(identity.id) : undefined;
  const lane =
    identity.groupKey === null || position === undefined
      ? `unordered ${++unordered}`
      : `${identity.source}\u0000${identity.groupKey}`;
  const receive = () =>
    receiver.receive(raw, identity, (id) => receivedMessage(raw, id, identity, parts.headers, parts.body));
  try {
    const outcome = await lanes.run(lane, position ?? 0n, receive, (failedAt) =>
      refusal(what, identity, failedAt),
    );
    await settlement.acknowledge();
    return { status: 'fulfilled', value: outcome };
  } catch (error) {
    try {
      await settlement.giveBack();
    } catch (cause) {
      // The channel or connection is gone: the broker gives the message back by itself.
      logger.warn(`outboxer: ${what} could not give a message back`, { error: describeError(cause, 500) });
    }
    logger.error(`outboxer: ${what} did not handle a message; the broker delivers it again`, {
      id: identity.id,
      source: identity.source,
      error: describeError(error, 500),
    });
    return { status: 'rejected', reason: error };
  }
}

function refusal(what: string, identity: ReceivedIdentity, failedAt: bigint): OutboxerError {
  return new OutboxerError(
    'INVALID_STATE',
    `${what} gave message ${identity.id} back unhandled: message ${failedAt} of its group "${identity.groupKey}" failed before it, and handling this one first would break the group's order.`,
  );
}
