import { inspect } from 'node:util';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { payloadJson, publicEnvelope, relayEnvelope, RowEnvelope } from './payload.js';
import type { Envelope } from './relay.js';

const FIELDS = {
  id: 7,
  outbox: 'orders',
  type: 'OrderPaid',
  groupKey: 'order:7',
  partition: 3,
  payload: undefined as unknown,
  headers: { trace: 'abc' },
  attempts: 0,
  lastError: null,
  nextAttemptAt: null,
  failingSince: null,
  insertedAt: new Date(0),
};

class Polled extends RowEnvelope {
  constructor(text: string) {
    super();
    const { payload: _stored, ...fields } = FIELDS;
    Object.assign(this, fields, { status: 0, blocked: false });
    this.storePayload(text);
  }
}

/** A polled message as the dialects make it: every field, the payload still its stored text. */
function polled(text: string): Envelope {
  return new Polled(text);
}

// Text JSON.stringify would not write (the spaces), so a test can tell the stored text from a
// serialization of the parsed value.
const STORED = '{"orderId": 7, "items": [1, 2]}';

describe('payloadJson', () => {
  test('is the stored text while nothing has read the payload', () => {
    expect(payloadJson(relayEnvelope(polled(STORED)))).toBe(STORED);
  });

  test('serializes the payload once something has read it, so a change to it is sent', () => {
    const envelope = relayEnvelope(polled(STORED));
    (envelope.payload as { orderId: number }).orderId = 8;
    expect(payloadJson(envelope)).toBe('{"orderId":8,"items":[1,2]}');
  });

  test('serializes the payload of a copy with a payload of its own', () => {
    const envelope = relayEnvelope(polled(STORED));
    const redacted = { ...envelope, payload: { orderId: 0 } };
    expect(payloadJson(redacted)).toBe('{"orderId":0}');
    expect(payloadJson({ ...relayEnvelope(polled(STORED)) })).toBe('{"orderId":7,"items":[1,2]}');
  });

  test('serializes the payload of an object that inherits from an envelope', () => {
    const envelope = relayEnvelope(polled(STORED));
    const derived = Object.create(envelope, { payload: { value: 'other', enumerable: true } }) as Envelope;
    expect(payloadJson(derived)).toBe('"other"');
  });

  test('serializes a plain envelope, and writes undefined as null', () => {
    expect(payloadJson({ ...FIELDS, payload: { a: [1, 'x'] } })).toBe('{"a":[1,"x"]}');
    expect(payloadJson({ ...FIELDS, payload: undefined })).toBe('null');
  });

  test('gives the text of JSON.stringify for any payload the outbox stored', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const stored = JSON.stringify(value);
        expect(payloadJson(relayEnvelope(polled(stored)))).toBe(JSON.stringify(JSON.parse(stored)));
      }),
    );
  });
});

describe('relayEnvelope', () => {
  test('has the public fields in the order of Envelope, and none of the engine', () => {
    const envelope = relayEnvelope(polled(STORED));
    expect(Object.keys(envelope)).toEqual([
      'id',
      'outbox',
      'type',
      'groupKey',
      'partition',
      'payload',
      'headers',
      'attempts',
      'lastError',
      'nextAttemptAt',
      'failingSince',
      'insertedAt',
    ]);
    expect(envelope).toEqual({ ...FIELDS, payload: { orderId: 7, items: [1, 2] } });
  });

  test('parses the payload once, for the relay and the polled message alike', () => {
    const message = polled(STORED);
    const first = relayEnvelope(message);
    const second = relayEnvelope(message);
    expect(first.payload).toBe(second.payload);
    expect(message.payload).toBe(first.payload);
  });

  test('reads like a plain object in logs, JSON and clones', () => {
    const envelope = relayEnvelope(polled(STORED));
    const plain = { ...FIELDS, payload: { orderId: 7, items: [1, 2] } };
    expect(inspect(envelope)).toBe(inspect(plain));
    expect(JSON.stringify(envelope)).toBe(JSON.stringify(plain));
    expect(structuredClone(envelope)).toEqual(plain);
  });

  test('a copy made with the property descriptors says how to copy it instead', () => {
    const envelope = relayEnvelope(polled(STORED));
    const copy = Object.defineProperties({}, Object.getOwnPropertyDescriptors(envelope)) as Envelope;
    expect(() => copy.payload).toThrow(TypeError);
    expect(() => copy.payload).toThrow(/copy it with \{ \.\.\.envelope \} or structuredClone/);
    expect({ ...envelope }.payload).toEqual({ orderId: 7, items: [1, 2] });
  });

  test('a listing gets a plain object, its payload parsed', () => {
    const listed = publicEnvelope(polled(STORED));
    expect(Object.getPrototypeOf(listed)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(listed, 'payload')?.value).toEqual({ orderId: 7, items: [1, 2] });
    expect(Object.keys(listed)).toEqual(Object.keys(FIELDS));
  });

  test('keeps a payload the driver already parsed', () => {
    const message = { ...FIELDS, payload: { parsed: true } };
    expect(relayEnvelope(message).payload).toBe(message.payload);
    expect(payloadJson(relayEnvelope(message))).toBe('{"parsed":true}');
  });

  test('a stored text that is not JSON fails where the payload is read', () => {
    const envelope = relayEnvelope(polled('{not json'));
    expect(() => envelope.payload).toThrow(SyntaxError);
  });
});
