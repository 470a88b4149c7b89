import { expect, test } from 'vitest';
import type { Envelope } from '../../core/relay.js';
import {
  defaultMessageGroupId,
  findInvalidCharacter,
  messageAttributes,
  messageBytes,
  PACKED_HEADERS_ATTRIBUTE,
  toSqsId,
} from './sqs-message.js';
import { makeEnvelope } from '../../../test/support/envelopes.js';

const envelope = (over: Partial<Envelope>): Envelope =>
  makeEnvelope({ id: 7, outbox: 'orders', payload: null, insertedAt: new Date(0), ...over });

test('characters outside XML 1.0 are found, lone surrogates included', () => {
  expect(findInvalidCharacter('tab\tnew\nline\r ok é 😀 \uE000 \uFFFD')).toBeUndefined();
  expect(findInvalidCharacter('a\u0000')).toEqual({ index: 1, codePoint: 'U+0000' });
  expect(findInvalidCharacter('ab\uFFFF')).toEqual({ index: 2, codePoint: 'U+FFFF' });
  expect(findInvalidCharacter('x\uD800y')).toEqual({ index: 1, codePoint: 'U+D800' });
  expect(findInvalidCharacter('\uDC00')).toEqual({ index: 0, codePoint: 'U+DC00' });
});

test('ids SQS accepts are kept; others are hashed the same way every time', () => {
  expect(toSqsId('order:42')).toBe('order:42');
  expect(toSqsId('!~')).toBe('!~');
  expect(toSqsId('x'.repeat(128))).toBe('x'.repeat(128));
  expect(toSqsId('x'.repeat(129))).toMatch(/^sha256:[A-Za-z0-9_-]{43}$/);
  expect(toSqsId('with space')).toBe(toSqsId('with space'));
  expect(toSqsId('with space')).not.toBe(toSqsId('with  space'));
  expect(toSqsId('')).toMatch(/^sha256:/);
});

test('default MessageGroupId: group key, own id when there is none, outbox name in total ordering', () => {
  expect(defaultMessageGroupId(envelope({ groupKey: 'order:1' }), 'group')).toBe('order:1');
  expect(defaultMessageGroupId(envelope({ groupKey: null }), 'group')).toBe('7');
  expect(defaultMessageGroupId(envelope({ groupKey: 'order:1' }), 'total')).toBe('orders');
  expect(defaultMessageGroupId(envelope({ groupKey: 'order:1' }), 'none')).toBe('order:1');
});

test("a stored header in outboxer's namespace, any case, is dropped: it cannot pose as the id or the packed headers", () => {
  const attributes = messageAttributes(
    envelope({
      headers: { [PACKED_HEADERS_ATTRIBUTE]: 'mine', 'OUTBOXER-ID': '999', 'outboxer-id': '998', a: 'b' },
    }),
  );
  expect(attributes[PACKED_HEADERS_ATTRIBUTE]).toBeUndefined();
  expect(attributes['OUTBOXER-ID']).toBeUndefined();
  expect(attributes['outboxer-id']!.StringValue).toBe('7');
  expect(attributes.a!.StringValue).toBe('b');
});

test('size counts body and every attribute name, type and value in UTF-8 bytes', () => {
  expect(messageBytes('é', { ab: { DataType: 'String', StringValue: 'ü' } })).toBe(2 + 2 + 6 + 2);
});
