/**
 * The parts of amqplib the relay uses, described structurally so that `outboxer/rabbitmq` imports
 * nothing from amqplib, and the confirm channel the relay keeps: opened on first use, replaced on
 * the next batch after the broker or the network closed it.
 */
import { DeliveryError, OutboxerError } from '../../core/errors.js';
import { WaitTimeout, within } from '../shared/deadline.js';
import { OUTBOXER_HEADERS } from '../shared/headers.js';

/** Message properties the relay sets (a subset of amqplib's `Options.Publish`). */
export interface AmqpPublishProperties {
  messageId: string;
  persistent: boolean;
  contentType: string;
  type?: string;
  timestamp: number;
  headers: Record<string, string>;
  mandatory: boolean;
}

/** A message the broker returned as unroutable (`basic.return`). */
export interface AmqpReturnedMessage {
  fields: { replyCode: number; replyText: string; exchange: string; routingKey: string };
  properties: { messageId?: string | undefined; headers?: Record<string, unknown> | undefined };
}

/**
 * The part of an amqplib `ConfirmChannel` the relay calls. The relay opens its own channel and
 * closes it in `stop()`.
 */
export interface AmqpConfirmChannelLike {
  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: AmqpPublishProperties,
    callback: (error: unknown) => void,
  ): boolean;
  checkExchange(exchange: string): Promise<unknown>;
  close(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'close', listener: () => void): unknown;
  on(event: 'return', listener: (message: AmqpReturnedMessage) => void): unknown;
}

/**
 * The part of an amqplib connection the relay calls: a `ChannelModel` from `amqp.connect(url)` or
 * a recovering one from `amqp.connect(url, { recovery: true })`.
 *
 * @example
 * import amqp from 'amqplib';
 * const connection: AmqpConnectionLike = await amqp.connect('amqp://guest:guest@127.0.0.1:5672', { recovery: true });
 */
export interface AmqpConnectionLike {
  createConfirmChannel(): Promise<AmqpConfirmChannelLike>;
  close(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'close', listener: (error?: Error) => void): unknown;
}

/** The relay's confirm channel and what it learnt about the messages on it. */
export interface OpenChannel {
  readonly channel: AmqpConfirmChannelLike;
  /** Messages the broker returned as unroutable, by {@link returnKey}, until their confirm arrives. */
  readonly returned: Map<string, AmqpReturnedMessage['fields']>;
  /** Why the broker closed the channel (a channel error such as 404 NOT_FOUND), if it did. */
  closeReason: Error | undefined;
  closed: boolean;
}

/** Matches a returned message to its publish: outbox name and outbox id (ids repeat across outbox tables). */
export function returnKey(outbox: unknown, messageId: unknown): string {
  return `${String(outbox)}\u0000${String(messageId)}`;
}

/**
 * Keeps one confirm channel for the relay. A closed channel (connection lost, channel error) is
 * replaced on the next {@link acquire}; in the function form of `connection`, a lost connection
 * is reconnected too.
 */
export class RabbitMqChannels {
  private current: OpenChannel | undefined;
  private opening: Promise<OpenChannel> | undefined;
  private owned: AmqpConnectionLike | undefined;
  private stopped = false;

  constructor(
    private readonly source: AmqpConnectionLike | (() => Promise<AmqpConnectionLike>),
    private readonly timeout: number,
  ) {}

  /** The open channel, or a new one (waiting at most `timeout` ms, and not past `signal`). */
  acquire(signal?: AbortSignal): Promise<OpenChannel> {
    if (this.current !== undefined && !this.current.closed) return Promise.resolve(this.current);
    // Concurrent batches (several partitions) share one opening; a batch that gave up waiting
    // leaves it running, and the next batch picks it up.
    this.opening ??= this.open().finally(() => {
      this.opening = undefined;
    });
    return within(this.opening, this.timeout, signal, 'opening a RabbitMQ channel');
  }

  /** Closes the channel, e.g. after a confirm timeout, so that late confirms are never mixed up. */
  discard(open: OpenChannel): void {
    if (this.current === open) this.current = undefined;
    open.closed = true;
    // amqplib may throw at once (already closing) or reject later: neither matters here.
    Promise.resolve()
      .then(() => open.channel.close())
      .catch(() => undefined);
  }

  /** Allows opening again after {@link close} (the relay was stopped and is started again). */
  reopen(): void {
    this.stopped = false;
  }

  /**
   * Closes the channel, and the connection when the relay opened it. An opening still in flight
   * (a recovering connection waiting for the broker) closes what it opens when it completes.
   */
  async close(): Promise<void> {
    this.stopped = true;
    const open = this.current;
    this.current = undefined;
    // Bounded: closing waits for the broker's close-ok, which a stalled broker never sends.
    if (open !== undefined && !open.closed) {
      open.closed = true;
      await within(open.channel.close(), this.timeout, undefined, 'closing the RabbitMQ channel').catch(
        () => undefined,
      );
    }
    const owned = this.owned;
    this.owned = undefined;
    if (owned !== undefined)
      await within(owned.close(), this.timeout, undefined, 'closing the RabbitMQ connection').catch(
        () => undefined,
      );
  }

  private async open(): Promise<OpenChannel> {
    const connection = await this.connection();
    let channel: AmqpConfirmChannelLike;
    try {
      channel = await connection.createConfirmChannel();
    } catch (error) {
      throw channelFailure(error, typeof this.source === 'function');
    }
    const open: OpenChannel = { channel, returned: new Map(), closeReason: undefined, closed: false };
    // Without an 'error' listener a channel error would be thrown from amqplib's socket handler.
    channel.on('error', (error: Error) => {
      open.closeReason = error;
    });
    channel.on('close', () => {
      open.closed = true;
      if (this.current === open) this.current = undefined;
    });
    channel.on('return', (message: AmqpReturnedMessage) => {
      open.returned.set(
        returnKey(message.properties.headers?.[OUTBOXER_HEADERS.outbox], message.properties.messageId),
        message.fields,
      );
    });
    if (this.stopped) {
      await channel.close().catch(() => undefined);
      throw new DeliveryError('the relay was stopped while its RabbitMQ channel was opening');
    }
    this.current = open;
    return open;
  }

  private async connection(): Promise<AmqpConnectionLike> {
    if (typeof this.source !== 'function') return this.source;
    if (this.owned !== undefined) return this.owned;
    const connection = await this.source();
    if (this.stopped) {
      await connection.close().catch(() => undefined);
      throw new DeliveryError('the relay was stopped while it was connecting to RabbitMQ');
    }
    // The 'close' event that follows an 'error' is what matters; the listener keeps an 'error'
    // with no listener from crashing the process.
    connection.on('error', () => undefined);
    connection.on('close', () => {
      if (this.owned === connection) this.owned = undefined;
    });
    this.owned = connection;
    return connection;
  }
}

function channelFailure(error: unknown, ownsConnection: boolean): unknown {
  const message = describe(error);
  if (!ownsConnection && /connection closed/i.test(message)) {
    return new DeliveryError(
      `Cannot open a RabbitMQ channel: the connection passed to rabbitmqRelay is closed (${message}), and the relay cannot reopen a connection it does not own. Connect with amqplib's recovery option (amqp.connect(url, { recovery: true })), or pass connection: () => amqp.connect(url) so that the relay reconnects by itself.`,
      { cause: error },
    );
  }
  return error;
}

/**
 * True when a failure in `start()` to connect or open a channel is a setting to fix, not an
 * outage: refused credentials (403), a virtual host that does not exist or is not allowed, or a
 * connection of the user's that cannot open channels (closed for good).
 */
export function isMisconfiguration(error: unknown, ownsConnection: boolean): boolean {
  if (error instanceof WaitTimeout) return false; // the broker may just be down: batches retry
  if (!ownsConnection) return true;
  return AUTH_FAILURE.test(describe(error)) || VHOST_FAILURE.test(describe(error));
}

const AUTH_FAILURE = /ACCESS.REFUSED|\b403\b/i;
const VHOST_FAILURE = /got <ConnectionClose|NOT.ALLOWED|\b530\b/i;

/** RELAY_MISCONFIGURED for a connection failure found in `start()`, saying what to fix. */
export function misconfigured(error: unknown): OutboxerError {
  const message = describe(error);
  const hint = AUTH_FAILURE.test(message)
    ? 'RabbitMQ refused the login: check the user name and password, and that the user may access this virtual host.'
    : VHOST_FAILURE.test(message)
      ? 'RabbitMQ closed the connection while opening it: the virtual host in the URL probably does not exist, or the user has no permissions on it (rabbitmqctl set_permissions).'
      : 'rabbitmqRelay cannot open a channel on the connection it was given.';
  return new OutboxerError('RELAY_MISCONFIGURED', `${hint} (${message})`, { cause: error });
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
