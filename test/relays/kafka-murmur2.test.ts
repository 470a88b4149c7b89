import { describe, expect, test } from 'vitest';
import { javaPartition, murmur2 } from 'outboxer/kafka';

// Values printed by the Java client itself (kafka-clients 4.1.2, Java 17):
//   Utils.murmur2(key.getBytes(UTF_8)), BuiltInPartitioner.partitionForKey(bytes, 3) and (bytes, 7).
// They cover every tail length (0 to 3 bytes left after the 4-byte blocks), negative hashes, and
// multi-byte UTF-8.
const JAVA: Array<[key: string, murmur2: number, partitionOf3: number, partitionOf7: number]> = [
  ['', 275646681, 0, 2],
  ['a', -1563381124, 1, 5],
  ['ab', 316155434, 2, 0],
  ['abc', 479470107, 0, 4],
  ['abcd', -1323649548, 2, 5],
  ['abcde', 461995741, 1, 4],
  ['21', -973932308, 0, 3],
  ['foobar', -790332482, 0, 0],
  ['order:42', 1596225104, 2, 5],
  ['g0', 1721497005, 0, 4],
  ['g1', 450950174, 2, 3],
  ['g39', 924806176, 1, 0],
  ['a-little-bit-long-string', -985981536, 2, 1],
  ['a-little-bit-longer-string', -1486304829, 2, 0],
  ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971, 2, 3],
  ['zürich', 1564393856, 2, 4],
  ['日本語キー', 1445825182, 1, 4],
  ['😀emoji', -557038161, 2, 1],
  ['customer-1234567890', 1569016258, 1, 5],
];

describe('murmur2 (Java-compatible key partitioner)', () => {
  test.each(JAVA)('murmur2(%j) equals the Java client', (key, hash) => {
    expect(murmur2(Buffer.from(key, 'utf8'))).toBe(hash);
  });

  test.each(JAVA)("javaPartition(%j) picks the Java client's partition", (key, _hash, of3, of7) => {
    expect(javaPartition(key, 3)).toBe(of3);
    expect(javaPartition(key, 7)).toBe(of7);
    expect(javaPartition(Buffer.from(key, 'utf8'), 3)).toBe(of3);
  });

  test('toPositive clears the sign bit instead of taking the absolute value', () => {
    // murmur2('a') is negative: Math.abs would give 1563381124 % 7 = 4, Java gives 584102524 % 7 = 5.
    expect(Math.abs(murmur2(Buffer.from('a'))) % 7).toBe(4);
    expect(javaPartition('a', 7)).toBe(5);
  });

  test('every partition index stays in range', () => {
    for (let i = 0; i < 2000; i += 1) {
      const partitions = (i % 12) + 1;
      const partition = javaPartition(`key-${i}`, partitions);
      expect(partition).toBeGreaterThanOrEqual(0);
      expect(partition).toBeLessThan(partitions);
    }
  });
});
