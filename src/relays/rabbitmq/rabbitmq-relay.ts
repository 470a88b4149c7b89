import { OutboxerError } from '../../core/errors.js';
import type { Relay } from '../../core/relay.js';
import { within } from '../shared/deadline.js';
import { deliverInWaves } from '../shared/waves.js';
import { isMisconfiguration, misconfigured, RabbitMqChannels, type OpenChannel } from './rabbitmq-channel.js';
import {
  resolveRabbitMqOptions,
  type RabbitMqRelayOptions,
  type ResolvedRabbitMqOptions,
} from './rabbitmq-options.js';
import { publishWave } from './rabbitmq-publish.js';

/**
 * A relay that publishes to a RabbitMQ exchange over a confirm channel, and counts a message as
 * delivered only when the broker confirmed it (and did not return it as unroutable).
 *
 * Each message carries `message_id` = outbox id (what consumers deduplicate on), is persistent
 * (delivery mode 2) with content type `application/json`, `type` = message type, and the standard
 * outboxer headers. With `strictOrder` (the default) a group never has more than one unconfirmed
 * message, so a nacked or returned message is never overtaken by a later one of its group.
 *
 * @example
 * import amqp from 'amqplib';
 * import { rabbitmqRelay } from 'outboxer/rabbitmq';
 *
 * const relay = rabbitmqRelay({
 *   connection: () => amqp.connect('amqp://guest:guest@127.0.0.1:5672'), // the relay reconnects it
 *   exchange: 'orders',            // must exist: checked in start()
 *   routingKey: (m) => m.type ?? 'unknown', // default: the group key
 * });
 */
export function rabbitmqRelay(options: RabbitMqRelayOptions): Relay {
  const resolved = resolveRabbitMqOptions(options);
  const channels = new RabbitMqChannels(resolved.connection, resolved.timeout);
  return {
    name: resolved.name,
    // outboxer does not stop a relay whose start() failed: close what the attempt opened.
    start: () =>
      start(channels, resolved).catch(async (error: unknown) => {
        await channels.close();
        throw error;
      }),
    deliver: (batch, context) =>
      deliverInWaves(
        batch,
        context,
        async (wave) => {
          const open = await channels.acquire(context.signal);
          return publishWave(channels, open, wave, resolved, context.signal);
        },
        { perKey: resolved.strictOrder ? 1 : Infinity },
      ),
    stop: () => channels.close(),
  };
}

/**
 * Opens the channel and checks the exchange. Wrong credentials, a missing virtual host or exchange
 * are RELAY_MISCONFIGURED; a broker that cannot be reached is not (it may be down for a while, and
 * batches keep trying).
 */
async function start(channels: RabbitMqChannels, options: ResolvedRabbitMqOptions): Promise<void> {
  channels.reopen();
  let open: OpenChannel;
  try {
    open = await channels.acquire();
  } catch (error) {
    if (isMisconfiguration(error, typeof options.connection === 'function')) throw misconfigured(error);
    return;
  }
  // The default exchange always exists (and RabbitMQ refuses to let anyone check it).
  if (!options.checkExchange || options.exchange === '') return;
  try {
    await within(
      open.channel.checkExchange(options.exchange),
      options.timeout,
      undefined,
      'checking the RabbitMQ exchange',
    );
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    if (code === 404 || /NOT_FOUND/.test(String((error as Error)?.message))) {
      throw new OutboxerError(
        'RELAY_MISCONFIGURED',
        `RabbitMQ exchange "${options.exchange}" does not exist in this virtual host. Declare it before starting (channel.assertExchange("${options.exchange}", "topic", { durable: true })), or fix rabbitmqRelay.exchange.`,
        { cause: error },
      );
    }
    if (code === 403 || /ACCESS.REFUSED/.test(String((error as Error)?.message))) throw misconfigured(error);
    // Anything else (the connection dropped meanwhile): the next batch finds out.
  }
}
