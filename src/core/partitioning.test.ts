import { describe, expect, test } from 'vitest';
import { choosePartition, hashGroupKey } from './partitioning.js';

describe('partitioning', () => {
  test('FNV-1a of UTF-8 bytes, stable across versions (known values)', () => {
    expect(hashGroupKey('')).toBe(0x811c9dc5);
    expect(hashGroupKey('a')).toBe(0xe40c292c);
    expect(hashGroupKey('foobar')).toBe(0xbf9cf968);
    // Multi-byte characters hash their UTF-8 bytes, not UTF-16 code units.
    expect(hashGroupKey('é')).not.toBe(hashGroupKey('\u00e9'.normalize('NFD')));
  });

  test('a group key always maps to the same partition', () => {
    for (const key of ['order:1', 'order:2', 'tenant:ü', '🔑']) {
      const partition = choosePartition(key, 8);
      for (let i = 0; i < 10; i += 1) expect(choosePartition(key, 8)).toBe(partition);
      expect(partition).toBeGreaterThanOrEqual(0);
      expect(partition).toBeLessThan(8);
    }
  });

  test('keys spread over partitions', () => {
    const counts = new Array(4).fill(0);
    for (let i = 0; i < 4000; i += 1) counts[choosePartition(`order:${i}`, 4)] += 1;
    for (const count of counts) expect(count).toBeGreaterThan(800);
  });

  test('unordered messages are spread at random; one partition needs no hashing', () => {
    expect(choosePartition(null, 4, () => 0.99)).toBe(3);
    expect(choosePartition(null, 4, () => 0)).toBe(0);
    expect(choosePartition('anything', 1)).toBe(0);
  });
});
