/**
 * Publishing one wave on the confirm channel and reading the broker's answer for each message:
 * ack (delivered), nack, return (unroutable), or the channel closing under it.
 */
import { DeliveryError, PermanentError } from '../../core/errors.js';
import type { DeliveryOutcome, Envelope } from '../../core/relay.js';
import { payloadJson } from '../../core/payload.js';
import { within } from '../shared/deadline.js';
import { standardHeaders } from '../shared/headers.js';
import {
  returnKey,
  type AmqpPublishProperties,
  type AmqpReturnedMessage,
  type OpenChannel,
  type RabbitMqChannels,
} from './rabbitmq-channel.js';
import { AMQP_SHORT_STRING_BYTES, type ResolvedRabbitMqOptions } from './rabbitmq-options.js';

/** A message ready to publish: routing key, body and properties. */
export interface AmqpMessage {
  readonly routingKey: string;
  readonly content: Buffer;
  readonly properties: AmqpPublishProperties;
}

/**
 * Header names RabbitMQ takes as extra routing keys (sender-selected distribution, case-sensitive):
 * as text they close the channel, failing every message in flight with it, again at every retry.
 */
const SENDER_SELECTED = ['CC', 'BCC'] as const;

/**
 * Builds the AMQP message of an envelope: the JSON payload as body, `message_id` = outbox id (or `messageId`),
 * persistent, `application/json`, `type` = message type, the standard outboxer headers and
 * `timestamp` = insertion time (seconds). Throws {@link PermanentError} for a routing key or
 * message id the broker cannot take, and for a `CC` or `BCC` header.
 */
export function toAmqpMessage(envelope: Envelope, options: ResolvedRabbitMqOptions): AmqpMessage {
  let routingKey: unknown;
  try {
    routingKey = options.routingKey(envelope);
  } catch (error) {
    throw new PermanentError(
      `rabbitmqRelay.routingKey threw for message ${envelope.id}: ${String((error as Error)?.message ?? error)}`,
      { cause: error },
    );
  }
  if (typeof routingKey !== 'string' || Buffer.byteLength(routingKey, 'utf8') > AMQP_SHORT_STRING_BYTES) {
    throw new PermanentError(
      `rabbitmqRelay.routingKey returned ${typeof routingKey === 'string' ? `a key of ${Buffer.byteLength(routingKey, 'utf8')} bytes` : typeof routingKey} for message ${envelope.id}; AMQP routing keys are strings of at most ${AMQP_SHORT_STRING_BYTES} bytes (use a shorter group key, or a routingKey function).`,
    );
  }
  const headers = standardHeaders(envelope);
  for (const name of SENDER_SELECTED) {
    if (Object.hasOwn(headers, name)) {
      throw new PermanentError(
        `Message ${envelope.id} has a header named "${name}", which RabbitMQ reads as sender-selected distribution (a list of routing keys) and refuses as text, closing the channel. Rename it when publishing.`,
      );
    }
  }
  const properties: AmqpPublishProperties = {
    messageId: messageIdOf(envelope, options),
    persistent: true,
    contentType: 'application/json',
    timestamp: Math.floor(envelope.insertedAt.getTime() / 1000),
    headers,
    mandatory: options.mandatory,
  };
  if (envelope.type !== null) properties.type = envelope.type;
  return { routingKey, content: Buffer.from(payloadJson(envelope), 'utf8'), properties };
}

function messageIdOf(envelope: Envelope, options: ResolvedRabbitMqOptions): string {
  let id: unknown;
  try {
    id = options.messageId(envelope);
  } catch (error) {
    throw new PermanentError(
      `rabbitmqRelay.messageId threw for message ${envelope.id}: ${String((error as Error)?.message ?? error)}`,
      { cause: error },
    );
  }
  if (typeof id !== 'string' || id.length === 0 || Buffer.byteLength(id, 'utf8') > AMQP_SHORT_STRING_BYTES) {
    throw new PermanentError(
      `rabbitmqRelay.messageId returned ${JSON.stringify(id)} for message ${envelope.id}; a message_id is a non-empty string of at most ${AMQP_SHORT_STRING_BYTES} bytes.`,
    );
  }
  return id;
}

/**
 * Publishes a wave and waits for every confirm (at most `options.timeout` ms, not past `signal`).
 * Messages still unconfirmed then fail, and the channel is discarded, so that a late confirm can
 * never be taken for a message of a later batch.
 */
export async function publishWave(
  channels: RabbitMqChannels,
  open: OpenChannel,
  wave: readonly Envelope[],
  options: ResolvedRabbitMqOptions,
  signal: AbortSignal,
): Promise<DeliveryOutcome[]> {
  const outcomes = new Array<DeliveryOutcome | undefined>(wave.length);
  const confirmed = wave.map((envelope, index) =>
    publishOne(open, envelope, options).then((outcome) => {
      outcomes[index] = outcome;
    }),
  );
  try {
    await within(
      Promise.all(confirmed),
      options.timeout,
      signal,
      `waiting for RabbitMQ to confirm ${wave.length} message(s)`,
    );
  } catch (error) {
    channels.discard(open);
    return Array.from(outcomes, (outcome) => outcome ?? { ok: false, error });
  }
  return outcomes as DeliveryOutcome[];
}

function publishOne(
  open: OpenChannel,
  envelope: Envelope,
  options: ResolvedRabbitMqOptions,
): Promise<DeliveryOutcome> {
  let message: AmqpMessage;
  try {
    message = toAmqpMessage(envelope, options);
  } catch (error) {
    return Promise.resolve({ ok: false, error });
  }
  const key = returnKey(envelope.outbox, message.properties.messageId);
  return new Promise<DeliveryOutcome>((resolve) => {
    try {
      // No wait for 'drain' when publish returns false: a batch is bounded by batchSize, and
      // amqplib buffers what the socket has not taken yet.
      open.channel.publish(
        options.exchange,
        message.routingKey,
        message.content,
        message.properties,
        (error: unknown) => {
          const returned = open.returned.get(key);
          open.returned.delete(key);
          if (error) resolve({ ok: false, error: confirmFailure(error, open, message) });
          else if (returned !== undefined) resolve({ ok: false, error: unroutable(returned) });
          else resolve({ ok: true });
        },
      );
    } catch (error) {
      resolve({ ok: false, error: publishFailure(error) });
    }
  });
}

/** A nack, or the channel closing before the confirm: retryable, except a message over the broker's size limit. */
function confirmFailure(error: unknown, open: OpenChannel, message: AmqpMessage): DeliveryError {
  const text = error instanceof Error ? error.message : String(error);
  if (/nack/i.test(text)) {
    return new DeliveryError(
      'RabbitMQ nacked the message: the broker did not take responsibility for it (a queue refused it, e.g. x-overflow: reject-publish on a full queue, or a queue is unavailable). It will be sent again.',
      { cause: error },
    );
  }
  const reason = open.closeReason;
  if (reason === undefined) {
    return new DeliveryError(
      'The RabbitMQ channel closed before the broker confirmed the message (connection lost?); it will be sent again on a new channel.',
      { cause: error },
    );
  }
  const tooLarge = /message size (\d+) is larger than (?:configured )?max size (\d+)/i.exec(reason.message);
  if (tooLarge !== null && message.content.length > Number(tooLarge[2])) {
    return new PermanentError(
      `RabbitMQ refused the message as too large: ${message.content.length} bytes, over the broker's max_message_size of ${tooLarge[2]}.`,
      { cause: reason },
    );
  }
  const missingExchange = /NOT_FOUND - no exchange/i.test(reason.message);
  return new DeliveryError(
    `RabbitMQ closed the channel: ${reason.message}${missingExchange ? '. Declare the exchange (or fix rabbitmqRelay.exchange); the message will be sent again.' : ''}`,
    { cause: reason },
  );
}

function unroutable(fields: AmqpReturnedMessage['fields']): DeliveryError {
  return new DeliveryError(
    `RabbitMQ returned the message as unroutable (${fields.replyCode} ${fields.replyText}): no queue is bound to exchange "${fields.exchange}" for routing key "${fields.routingKey}". Bind a queue (or set an alternate exchange); the message will be sent again. Publish with mandatory: false to let the broker drop such messages instead.`,
  );
}

/** `publish` threw: the channel is closed (retryable), or amqplib cannot encode the message (permanent). */
function publishFailure(error: unknown): DeliveryError {
  const text = error instanceof Error ? error.message : String(error);
  if ((error as { name?: unknown })?.name === 'IllegalOperationError' || /closed/i.test(text)) {
    return new DeliveryError(
      `The RabbitMQ channel is closed (${text}); the message will be sent again on a new channel.`,
      { cause: error },
    );
  }
  return new PermanentError(`amqplib cannot encode the message: ${text}`, { cause: error });
}
