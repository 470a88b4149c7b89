import type { Envelope } from './relay.js';

/**
 * A polled payload is parsed when something reads it, not when it is polled: a relay that sends
 * JSON (Kafka, SQS, NATS, RabbitMQ, Redis Streams, a webhook) sends the text the outbox stored
 * and never parses it. Parsing a 200-byte payload and serializing it again costs about a tenth of
 * what the engine spends on a message.
 */

const INSPECT = Symbol.for('nodejs.util.inspect.custom');

const COPIED_ACCESSOR =
  "This envelope was copied with its property descriptors, which keep the payload's getter but not the payload: read the payload from the envelope the relay received, or copy it with { ...envelope } or structuredClone(envelope).";

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
 * The engine's envelope of a polled or listed row: its payload a getter on the prototype over the
 * stored text, parsed on first read. Internal: a spread or `Object.assign` copy leaves the
 * payload out, so it reaches users only through {@link relayEnvelope} or {@link publicEnvelope}.
 */
// The fields are declared by the interface of the same name: the constructors of the subclasses
// set them, in the order of Envelope.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging, @typescript-eslint/no-empty-object-type
export interface RowEnvelope extends Omit<Envelope, 'payload'> {}
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class RowEnvelope implements Envelope {
  #stored: StoredPayload | undefined;

  get payload(): unknown {
    return this.#stored?.read();
  }

  /** Sets the payload: the stored JSON text, parsed on the first read, or a value a driver parsed. */
  protected storePayload(column: unknown): void {
    this.#stored =
      typeof column === 'string'
        ? new StoredPayload(column, undefined)
        : new StoredPayload(undefined, column);
  }

  /** The payload of `envelope` when it is one of these, to share with its relay envelope. */
  static storedOf(envelope: Envelope): StoredPayload | undefined {
    return #stored in envelope ? envelope.#stored : undefined;
  }
}

/**
 * An envelope as a relay receives it: the public fields of a polled message in the order of
 * {@link Envelope}, none of the engine's, and the polled message's payload (parsed once for both).
 * The payload is an own enumerable accessor (one getter shared by all), so a spread or
 * `Object.assign` copy reads it like any other field; the stored text is a private field, so no
 * copy, equality check or log shows it, and only this envelope can hand it to {@link payloadJson}.
 */
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging, @typescript-eslint/no-empty-object-type
interface RelayEnvelope extends Envelope {}
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
class RelayEnvelope implements Envelope {
  #stored: StoredPayload | undefined;

  static readonly #payloadProperty: PropertyDescriptor = {
    get(this: RelayEnvelope): unknown {
      // A copy made with the property descriptors carries this getter but not the stored payload.
      if (!(#stored in this)) throw new TypeError(COPIED_ACCESSOR);
      return this.#stored!.read();
    },
    enumerable: true,
  };

  constructor(m: Envelope) {
    const fields = this as Writable<Envelope>;
    fields.id = m.id;
    fields.outbox = m.outbox;
    fields.type = m.type;
    fields.groupKey = m.groupKey;
    fields.partition = m.partition;
    const stored = RowEnvelope.storedOf(m);
    if (stored === undefined) fields.payload = m.payload;
    else {
      this.#stored = stored;
      Object.defineProperty(this, 'payload', RelayEnvelope.#payloadProperty);
    }
    fields.headers = m.headers;
    fields.attempts = m.attempts;
    fields.lastError = m.lastError;
    fields.nextAttemptAt = m.nextAttemptAt;
    fields.failingSince = m.failingSince;
    fields.insertedAt = m.insertedAt;
  }

  /** The payload's stored text, when `envelope` is one of these and nothing has read the payload. */
  static storedText(envelope: object): string | undefined {
    return #stored in envelope ? (envelope as RelayEnvelope).#stored?.text : undefined;
  }

  /** `console.log` shows the fields and the parsed payload, as it would of a plain object. */
  [INSPECT](): Envelope {
    return { ...this };
  }
}

/** The envelope a relay receives for a polled message. */
export function relayEnvelope(m: Envelope): Envelope {
  return new RelayEnvelope(m);
}

/** A plain object of an envelope's public fields, its payload parsed: what an operator's listing returns. */
export function publicEnvelope(m: Envelope): Envelope {
  return {
    id: m.id,
    outbox: m.outbox,
    type: m.type,
    groupKey: m.groupKey,
    partition: m.partition,
    payload: m.payload,
    headers: m.headers,
    attempts: m.attempts,
    lastError: m.lastError,
    nextAttemptAt: m.nextAttemptAt,
    failingSince: m.failingSince,
    insertedAt: m.insertedAt,
  };
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
  return RelayEnvelope.storedText(envelope) ?? JSON.stringify(envelope.payload) ?? 'null';
}
