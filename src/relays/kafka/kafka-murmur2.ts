/**
 * The Java client's key partitioner, so that a key goes to the same Kafka partition whichever client
 * (Java, kafkajs, @platformatic/kafka, this relay) produced it.
 */

const SEED = 0x9747b28c;
const M = 0x5bd1e995;

/**
 * Kafka's murmur2 hash (`org.apache.kafka.common.utils.Utils.murmur2`), as a signed 32-bit integer.
 * 32-bit multiplications use `Math.imul`, which wraps exactly like Java's `int`.
 *
 * @example
 * murmur2(Buffer.from('21')) // -973932308, as in Java
 */
export function murmur2(data: Uint8Array): number {
  const length = data.length;
  let h = SEED ^ length;
  const length4 = length >>> 2;
  for (let i = 0; i < length4; i += 1) {
    const i4 = i * 4;
    let k = data[i4]! | (data[i4 + 1]! << 8) | (data[i4 + 2]! << 16) | (data[i4 + 3]! << 24);
    k = Math.imul(k, M);
    k ^= k >>> 24;
    k = Math.imul(k, M);
    h = Math.imul(h, M);
    h ^= k;
  }
  // The last 1 to 3 bytes (Java does this with a switch that falls through).
  const tail = length & ~3;
  const rest = length % 4;
  if (rest > 0) {
    if (rest === 3) h ^= data[tail + 2]! << 16;
    if (rest >= 2) h ^= data[tail + 1]! << 8;
    h ^= data[tail]!;
    h = Math.imul(h, M);
  }
  h ^= h >>> 13;
  h = Math.imul(h, M);
  h ^= h >>> 15;
  return h | 0;
}

/**
 * The partition the Java producer picks for a key: `toPositive(murmur2(utf8(key))) % partitions`
 * (`BuiltInPartitioner.partitionForKey`).
 *
 * @example
 * javaPartition('order:42', 3) // 2
 */
export function javaPartition(key: string | Uint8Array, partitions: number): number {
  const bytes = typeof key === 'string' ? Buffer.from(key, 'utf8') : key;
  // toPositive: clear the sign bit (not Math.abs, which differs for negative values).
  return (murmur2(bytes) & 0x7fffffff) % partitions;
}
