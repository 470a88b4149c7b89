import type { Envelope, Headers } from './relay.js';

/**
 * A polled payload is parsed when something reads it, not when it is polled: a relay that sends
 * JSON (Kafka, SQS, NATS, RabbitMQ, Redis Streams, a webhook) sends the text the outbox stored
 * and never parses it. Parsing a 200-byte payload and serializing it again costs about a tenth of
 * what the engine spends on a message.
 */

const INSPECT = Symbol.for('nodejs.util.inspect.custom');

/** A payload's stored JSON text until its first read, then its parsed value. */
class StoredPayload {
  constructor(
    public text: string | undefined,
    public value: unknown,
  ) {}

  read(): unknown {
    if (this.text !== undefined) {
      this.value = JSON.parse(this.text);
      this.text = undefined;
    }
    return this.value;
  }
}

export type Writable<T> = { -readonly [K in keyof T]: T[K] };

/**
 * An envelope whose payload may still be the text the outbox stored. The payload is an own
 * enumerable accessor (one getter shared by all), so a spread or `Object.assign` copy reads it
 * like any other field; the stored text is a private field, so no copy, equality check or log
 * shows it, and only the envelope the engine made can hand it to {@link payloadJson}.
 */
export class StoredPayloadEnvelope implements Envelope {
  declare readonly id: number;
  declare readonly outbox: string;
  declare readonly type: string | null;
  declare readonly groupKey: string | null;
  declare readonly partition: number;
  declare readonly payload: unknown;
  declare readonly headers: Headers;
  declare readonly attempts: number;
  declare readonly lastError: string | null;
  declare readonly nextAttemptAt: Date | null;
  declare readonly failingSince: Date | null;
  declare readonly insertedAt: Date;
  #stored: StoredPayload | undefined;

  static readonly #payloadProperty: PropertyDescriptor = {
    get(this: StoredPayloadEnvelope): unknown {
      return this.#stored!.read();
    },
    enumerable: true,
  };

  /**
   * Sets the payload, in its place among the fields: the stored JSON text, parsed on the first
   * read, or a value a driver parsed already.
   */
  protected storePayload(stored: unknown): void {
    if (typeof stored === 'string') this.#lazy(new StoredPayload(stored, undefined));
    else (this as Writable<Envelope>).payload = stored;
  }

  /** Sets the payload to `envelope`'s: shared, still unparsed, when it is one of these. */
  protected sharePayload(envelope: Envelope): void {
    if (#stored in envelope && envelope.#stored !== undefined) this.#lazy(envelope.#stored);
    else (this as Writable<Envelope>).payload = envelope.payload;
  }

  #lazy(stored: StoredPayload): void {
    this.#stored = stored;
    Object.defineProperty(this, 'payload', StoredPayloadEnvelope.#payloadProperty);
  }

  /** The payload's stored text, when `envelope` is one of these and nothing has read the payload. */
  static storedText(envelope: object): string | undefined {
    return #stored in envelope ? (envelope as StoredPayloadEnvelope).#stored?.text : undefined;
  }

  /** `console.log` shows the fields and the parsed payload, as it would of a plain object. */
  [INSPECT](): Envelope {
    return { ...this };
  }
}

/**
 * An envelope as a relay receives it: the public fields of a polled message in the order of
 * {@link Envelope}, none of the engine's, and the polled message's payload (parsed once for both).
 */
class RelayEnvelope extends StoredPayloadEnvelope {
  constructor(m: Envelope) {
    super();
    const fields = this as Writable<Envelope>;
    fields.id = m.id;
    fields.outbox = m.outbox;
    fields.type = m.type;
    fields.groupKey = m.groupKey;
    fields.partition = m.partition;
    this.sharePayload(m);
    fields.headers = m.headers;
    fields.attempts = m.attempts;
    fields.lastError = m.lastError;
    fields.nextAttemptAt = m.nextAttemptAt;
    fields.failingSince = m.failingSince;
    fields.insertedAt = m.insertedAt;
  }
}

/** The envelope a relay receives for a polled message. */
export function relayEnvelope(m: Envelope): Envelope {
  return new RelayEnvelope(m);
}

/**
 * The payload as JSON text: the text the outbox stored when nothing has read the payload since it
 * was polled (so nothing can have changed it), otherwise `JSON.stringify(envelope.payload)`
 * (`'null'` for `undefined`). A relay that sends JSON calls this instead of stringifying, and so
 * skips parsing the payload and serializing it again. Throws what `JSON.stringify` throws.
 *
 * @example
 * const body = payloadJson(envelope); // the text of JSON.stringify(envelope.payload)
 */
export function payloadJson(envelope: Envelope): string {
  return StoredPayloadEnvelope.storedText(envelope) ?? JSON.stringify(envelope.payload) ?? 'null';
}
