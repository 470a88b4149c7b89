import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import type { Envelope } from '../../core/relay.js';
import { draftRecords, utf8Length } from './kafka-records.js';

function envelope(id: number, headers: Record<string, string>, payload: unknown = { id }): Envelope {
  return {
    id,
    outbox: 'orders',
    type: null,
    groupKey: `order:${id}`,
    partition: 0,
    payload,
    headers,
    attempts: 0,
    lastError: null,
    nextAttemptAt: null,
    failingSince: null,
    insertedAt: new Date(0),
  } as unknown as Envelope;
}

describe('utf8Length', () => {
  test('counts what Buffer.byteLength counts, for any well-formed string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (text) => {
        expect(utf8Length(text)).toBe(Buffer.byteLength(text, 'utf8'));
      }),
    );
  });
});

describe('draftRecords', () => {
  test("a record's size counts its headers' bytes, multi-byte ones included", () => {
    const [ascii] = draftRecords([envelope(1, { note: 'ab' })], 'group', () => 'events', 1 << 20);
    const [wide] = draftRecords([envelope(1, { note: '€😀' })], 'group', () => 'events', 1 << 20);
    // '€' is 3 bytes and '😀' 4, where 'ab' is 2.
    expect(wide!.bytes - ascii!.bytes).toBe(5);
  });

  test('a bad topic name fails each of its messages, and the others still go', () => {
    const drafts = draftRecords(
      [envelope(1, {}), envelope(2, {}), envelope(3, {})],
      'group',
      (e) => (e.id === 2 ? 'good' : 'no spaces'),
      1 << 20,
    );
    expect(drafts.map((d) => d.state)).toEqual(['failed', 'ready', 'failed']);
    expect(String(drafts[0]!.error)).toMatch(/does not accept as a topic name/);
  });

  test('a message over maxBytes fails alone, with its size in the error', () => {
    const drafts = draftRecords(
      [envelope(1, {}, 'x'.repeat(2_000)), envelope(2, {})],
      'group',
      () => 'events',
      1_000,
    );
    expect(drafts.map((d) => d.state)).toEqual(['failed', 'ready']);
    expect(String(drafts[0]!.error)).toMatch(/more than the relay's maxBytes \(1000\)/);
  });
});
