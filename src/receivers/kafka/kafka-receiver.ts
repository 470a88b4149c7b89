/**
 * The Kafka receivers: a record consumed with @platformatic/kafka or kafkajs becomes one inbox
 * call in the consumer's transaction, and its offset is committed (platformatic) or resolved for
 * kafkajs's commit only after that transaction committed. Typed structurally: either client,
 * @platformatic/kafka 1.x or 2.x, with or without deserializers.
 */
import {
  InboxReceiver,
  type ReceivedMessage,
  type ReceiveOutcome,
  type ReceiverOptions,
} from '../../core/inbox/receiver.js';
import { headersOf, identityOf, receivedMessage, textOf } from '../shared/received.js';
import { OutboxerError } from '../../core/errors.js';
import { OrderedLanes } from '../shared/lanes.js';

/** A record as a Kafka receiver's handler gets it. */
export interface ReceivedKafkaMessage<Raw> extends ReceivedMessage<Raw> {
  readonly topic: string;
  readonly partition: number;
  /** The record's offset, as decimal text. */
  readonly offset: string;
  /** The record's key as text (outboxer's relay sets the group key); null without one. */
  readonly key: string | null;
}

/**
 * Options of the Kafka receivers: those of every receiver.
 *
 * @example
 * platformaticReceiver({ outboxer, inbox: 'orders', transaction: (work) => sql.begin(work),
 *   handler: async (message, sql) => { await sql`INSERT INTO shipments ${sql(message.payload)}`; } });
 */
export type KafkaReceiverOptions<
  Raw,
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
> = ReceiverOptions<ReceivedKafkaMessage<Raw>, OutboxerTx, Sync, Tx, Raw>;

/** What the @platformatic/kafka receiver uses of a consumed message (1.x and 2.x). */
export interface PlatformaticConsumedMessageLike {
  readonly topic: string;
  readonly partition: number;
  readonly offset: bigint;
  readonly key?: unknown;
  readonly value?: unknown;
  readonly headers?: ReadonlyMap<unknown, unknown> | undefined;
  /** Commits this message's offset (the next to read is the one after it). */
  commit(): void | Promise<void>;
}

/** What the kafkajs receiver uses of `eachMessage`'s argument. */
export interface KafkajsEachMessagePayloadLike {
  readonly topic: string;
  readonly partition: number;
  readonly message: {
    readonly key?: Buffer | string | null | undefined;
    readonly value: Buffer | string | null;
    readonly offset: string;
    readonly headers?:
      Readonly<Record<string, Buffer | string | (Buffer | string)[] | undefined>> | undefined;
  };
}

/** A record of either client, as the shared step reads it. */
interface RecordParts {
  readonly topic: string;
  readonly partition: number;
  readonly offset: bigint;
  readonly key: unknown;
  readonly value: unknown;
  readonly headers: unknown;
}

/** The shared step: the partition's order, the identity, the inbox call. */
function kafkaReceiver<Raw, Sync extends boolean>(
  what: string,
  options: unknown,
): (raw: Raw, record: RecordParts, acknowledge: () => unknown) => Promise<ReceiveOutcome> {
  const receiver = new InboxReceiver<ReceivedKafkaMessage<Raw>, Sync, Raw>(what, options, []);
  const lanes = new OrderedLanes();
  return (raw, record, acknowledge) =>
    lanes.run(
      `${record.topic}/${record.partition}`,
      record.offset,
      async () => {
        const headers = headersOf(record.headers);
        const identity = identityOf(headers, record.topic, receiver.source);
        const outcome = await receiver.receive(raw, identity, (id) => ({
          ...receivedMessage(raw, id, identity, headers, record.value),
          topic: record.topic,
          partition: record.partition,
          offset: String(record.offset),
          key: textOf(record.key) ?? null,
        }));
        // After the commit of the transaction, and only then.
        await acknowledge();
        return outcome;
      },
      (failedAt) => refusal(what, record, failedAt),
    );
}

function refusal(what: string, record: RecordParts, failedAt: bigint): OutboxerError {
  return new OutboxerError(
    'INVALID_STATE',
    `${what} did not handle offset ${record.offset} of ${record.topic}/${record.partition}: the record at offset ${failedAt} failed before it, and committing a later offset would acknowledge that one unhandled. Stop consuming and consume again from the committed offset, which delivers it again.`,
  );
}

/**
 * A receiver for messages consumed with @platformatic/kafka: `await receive(message)` handles the
 * message once in your transaction, then commits its offset. Consume with `autocommit: false`
 * (autocommit would commit offsets on a timer, handled or not). Calls for one partition run one
 * after another, in the order made. When one fails (the handler, the transaction, the commit) its
 * promise rejects, and the calls of its partition already waiting behind it are refused
 * (`INVALID_STATE`), neither handled nor committed. Let the error end your loop: close the stream
 * and consume again, which delivers the message again from the committed offset. A loop that
 * catches the error and goes on would commit a later offset, acknowledging the failed message.
 *
 * @example
 * const receive = platformaticReceiver({ outboxer, inbox: 'orders', transaction, handler });
 * const stream = await consumer.consume({ topics: ['orders'], autocommit: false });
 * for await (const message of stream) await receive(message);
 */
export function platformaticReceiver<
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
  Raw extends PlatformaticConsumedMessageLike = PlatformaticConsumedMessageLike,
>(options: KafkaReceiverOptions<Raw, OutboxerTx, Sync, Tx>): (message: Raw) => Promise<ReceiveOutcome> {
  const receive = kafkaReceiver<Raw, Sync>('platformaticReceiver', options);
  return (message) => receive(message, partsOf(message), () => message.commit());
}

function partsOf(message: PlatformaticConsumedMessageLike): RecordParts {
  return {
    topic: message.topic,
    partition: message.partition,
    offset: message.offset,
    key: message.key,
    value: message.value,
    headers: message.headers,
  };
}

/**
 * A receiver for kafkajs: pass it as `eachMessage`. It handles the message once in your
 * transaction and returns after the commit; kafkajs then marks the offset for its (auto) commit,
 * so an offset is never committed before its message's effect. When it throws, kafkajs does not
 * mark the offset and delivers the message again (its `retry` settings).
 *
 * @example
 * await consumer.run({ eachMessage: kafkajsReceiver({ outboxer, inbox: 'orders', transaction, handler }) });
 */
export function kafkajsReceiver<
  OutboxerTx,
  Sync extends boolean,
  Tx extends OutboxerTx = OutboxerTx,
  Raw extends KafkajsEachMessagePayloadLike = KafkajsEachMessagePayloadLike,
>(options: KafkaReceiverOptions<Raw, OutboxerTx, Sync, Tx>): (payload: Raw) => Promise<void> {
  const receive = kafkaReceiver<Raw, Sync>('kafkajsReceiver', options);
  return async (payload) => {
    const { topic, partition, message } = payload;
    const parts = {
      topic,
      partition,
      offset: BigInt(message.offset),
      key: message.key,
      value: message.value,
    };
    await receive(payload, { ...parts, headers: message.headers }, () => undefined);
  };
}
