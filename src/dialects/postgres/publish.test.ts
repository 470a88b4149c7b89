import { describe, expect, test } from 'vitest';
import type { InsertOptions, InsertRow } from '../../core/dialect.js';
import { insert } from './publish.js';

const row = (n: number, groupKey: string | null): InsertRow => ({
  outbox: 'orders',
  partition: n % 4,
  groupKey,
  type: 'order.placed',
  payload: JSON.stringify({ n }),
  headers: null,
});

const variants: Array<[string, string | null, InsertOptions]> = [
  ['plain', 'order:1', { serialize: false, notify: undefined }],
  ['serialized', 'order:1', { serialize: true, notify: undefined }],
  ['serialized, no group key', null, { serialize: true, notify: undefined }],
  ['notifying', 'order:1', { serialize: false, notify: { channel: 'outboxer', payloads: ['app:orders:1'] } }],
  ['both', 'order:1', { serialize: true, notify: { channel: 'outboxer', payloads: ['app:orders:1'] } }],
];

describe('the one-row publish statement', () => {
  test.each(variants)(
    '%s: the same text object for its table, equal to a fresh build, values its own',
    (_, key, options) => {
      const table = { schema: 'app', name: 'outbox' };
      const first = insert(table, [row(1, key)], options);
      const second = insert(table, [row(2, key)], options);
      expect(second.text).toBe(first.text);
      expect(second.values).not.toEqual(first.values);
      // Another table object of the same name builds its own text: the cached one matches it.
      const fresh = insert({ schema: 'app', name: 'outbox' }, [row(2, key)], options);
      expect(fresh.text).toBe(second.text);
      expect(fresh.values).toEqual(second.values);
    },
  );

  test('each variant has its own text, and another table its own', () => {
    const table = { schema: 'app', name: 'outbox' };
    const texts = variants.map(([, key, options]) => insert(table, [row(1, key)], options).text);
    // A serialized row without a group key takes no lock: the plain text.
    expect(texts[2]).toBe(texts[0]);
    expect(new Set(texts).size).toBe(4);
    const other = insert({ schema: 'app', name: 'other' }, [row(1, 'order:1')], variants[0]![2]).text;
    expect(other).not.toBe(texts[0]);
    expect(other).toContain('"app"."other"');
  });
});
